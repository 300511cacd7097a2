@testable import churnwatch
import Testing

/// Durations as the CLI takes them in flags and settings.
@Suite struct DurationTests {
    @Test("durations parse as the CLI takes them", arguments: [
        ("3d", 259_200.0), ("12h", 43_200.0), ("90m", 5400.0), ("45s", 45.0), ("600", 600.0), ("1.5d", 129_600.0),
    ])
    func durations(text: String, seconds: Double) {
        #expect(Durations.parse(text) == seconds)
    }

    @Test("bad durations are refused", arguments: ["", "d", "-3d", "three days", "3w"])
    func badDurations(text: String) {
        #expect(Durations.parse(text) == nil)
    }

    @Test("durations: bounded to 100 years, negative ones named as such (issue 18 items 5, 11)")
    func durations() {
        #expect(Durations.parse("3d") == 3 * 86_400.0)
        #expect(Durations.parse("36500d") == 36_500 * 86_400.0)
        #expect(Durations.parse("36501d") == nil)
        #expect(Durations.parse("99999999999d") == nil)
        #expect(Durations.parse("1e308d") == nil, "finite value, infinite product")
        #expect(Durations.checked("99999999999d") == .failure(.tooLong))
        #expect(Durations.checked("-5m") == .failure(.negative))
        #expect(Durations.checked("soon") == .failure(.notADuration))
        #expect(Durations.checked("90m") == .success(5400))
    }
}
