import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

/// `--as-of` and the selection windows, shared by plan, run and backfill.
struct WindowOptions: ParsableArguments {
    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment the run is for, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    @Option(name: .customLong("start-window"), parsing: .unconditional, help: ArgumentHelp("Poll periods that started within this long (default: $CHURNWATCH_START_WINDOW, else 3d).", valueName: "duration"))
    var startWindow: String?

    @Option(name: .customLong("end-window"), parsing: .unconditional, help: ArgumentHelp("Poll periods that end within this long (default: $CHURNWATCH_END_WINDOW, else 3d).", valueName: "duration"))
    var endWindow: String?

    @Option(name: .customLong("lapsed-window"), parsing: .unconditional, help: ArgumentHelp("Poll periods that ended within this long (default: $CHURNWATCH_LAPSED_WINDOW, else 3d).", valueName: "duration"))
    var lapsedWindow: String?

    @Option(name: .customLong("stale-after"), parsing: .unconditional, help: ArgumentHelp("Poll anything not polled for this long (default: $CHURNWATCH_STALE_AFTER, else 30d; with the change feed live, 120d, each subscription on its own night).", valueName: "duration"))
    var staleAfter: String?

    func resolvedAsOf(now: Date = Date()) throws -> Date {
        guard let asOf else { return now }
        if let d = Self.parseISO8601(asOf) { return d }
        throw CLIError.configuration("--as-of \"\(asOf)\" is not an ISO 8601 time (e.g. 2026-11-21T02:00:00Z)")
    }

    /// The windows: each flag, else its environment variable (docs/architecture.md §4: every setting is
    /// also an environment variable), else the default. A bad value is one line naming the flag
    /// or variable it came from.
    func resolvedWindows(environment env: [String: String] = ProcessInfo.processInfo.environment) throws -> PlanWindows {
        var w = PlanWindows()
        func duration(_ flag: String, _ variable: String, _ value: String?) throws -> TimeInterval? {
            try durationSetting(flag: flag, variable: variable, value: value, environment: env)
        }
        if let d = try duration("--start-window", "CHURNWATCH_START_WINDOW", startWindow) { w.start = d }
        if let d = try duration("--end-window", "CHURNWATCH_END_WINDOW", endWindow) { w.end = d }
        if let d = try duration("--lapsed-window", "CHURNWATCH_LAPSED_WINDOW", lapsedWindow) { w.lapsed = d }
        if let d = try duration("--stale-after", "CHURNWATCH_STALE_AFTER", staleAfter) {
            w.staleAfter = d
            w.feedStaleAfter = d
        }
        w.configuredEnvironment = FeedStatusText.environment(env)
        return w
    }

    static func parseISO8601(_ text: String) -> Date? {
        for style in [Date.ISO8601FormatStyle(includingFractionalSeconds: true), Date.ISO8601FormatStyle()] {
            if let d = try? style.parse(text) { return d }
        }
        // A date alone means its midnight UTC.
        if let d = try? Date.ISO8601FormatStyle().year().month().day().parse(text) { return d }
        return nil
    }
}

/// The duration a flag gives (`value`), else its environment variable (blank counts as unset),
/// else nil; a bad value is one line naming the flag or the variable it came from.
func durationSetting(flag: String, variable: String, value: String?, environment env: [String: String]) throws -> TimeInterval? {
    let fromEnv = env[variable].map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
    guard let text = value ?? fromEnv else { return nil }
    return try parseDurationSetting(value != nil ? flag : variable, text)
}

/// A duration flag or setting (`3d`, `12h`, `90m`, `45s`), or one line naming it: not a duration,
/// negative, zero when it must be `positive`, or longer than 100 years (exit 78).
func parseDurationSetting(_ name: String, _ text: String, positive: Bool = false) throws -> TimeInterval {
    switch Durations.checked(text) {
    case .success(let d):
        guard !positive || d > 0 else { throw CLIError.configuration("\(name) \"\(text)\" is zero: it must be a positive duration (e.g. 15m)") }
        return d
    case .failure(let problem):
        throw CLIError.configuration("\(name) \"\(text.prefix(40))\" \(problem)")
    }
}

func formatDuration(_ seconds: TimeInterval) -> String {
    guard seconds.isFinite, seconds < 1e12 else { return "more than 30,000 years" }
    let s = Int(seconds.rounded(.up))
    if s >= 3600 { return "\(s / 3600)h \(s % 3600 / 60)m" }
    if s >= 60 { return "\(s / 60)m \(s % 60)s" }
    return "\(s)s"
}

func formatWindow(_ seconds: TimeInterval) -> String {
    if seconds.truncatingRemainder(dividingBy: 86_400) == 0 { return "\(Int(seconds / 86_400))d" }
    if seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600))h" }
    return "\(Int(seconds / 60))m"
}
