import Foundation

/// A time given on the command line: ISO 8601, or a date alone (its midnight UTC).
enum TimeArgument {
    /// nil when absent; a configuration error (78) naming the flag when not a time.
    static func parse(_ text: String?, flag: String) throws -> Date? {
        guard let text else { return nil }
        guard let date = WindowOptions.parseISO8601(text) else {
            throw CLIError.configuration("\(flag) \"\(text)\" is not an ISO 8601 time (e.g. 2026-11-21T02:00:00Z)")
        }
        return date
    }

    /// A moment as ISO 8601 in UTC, to the second.
    static func iso(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
    }
}
