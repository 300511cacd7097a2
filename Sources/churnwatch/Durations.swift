import Foundation

/// Durations as flags and settings give them: `3d`, `12h`, `90m`, `45s`, or a plain number of
/// seconds.
enum Durations {
    /// The longest duration any flag or setting takes: 100 years. Longer ones are a typo, and
    /// dates that far from now no longer fit PostgreSQL's or Foundation's arithmetic.
    static let maximum: TimeInterval = 36_500 * 86_400

    /// Why a duration was refused, for a one-line message naming the flag.
    enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        case notADuration, negative, tooLong

        var description: String {
            switch self {
            case .notADuration: "is not a duration (e.g. 3d, 12h, 90m, 45s)"
            case .negative: "is negative: a duration must be positive"
            case .tooLong: "is longer than the maximum of 36500d (100 years)"
            }
        }
    }

    /// Parses a duration like ``parse(_:)``, saying why one is refused: not a
    /// duration, negative, or longer than ``maximum``.
    static func checked(_ text: String) -> Result<TimeInterval, Problem> {
        if let d = parse(text) { return .success(d) }
        let t = text.trimmingCharacters(in: .whitespaces)
        if t.hasPrefix("-"), parseUnbounded(String(t.dropFirst())) != nil {
            return .failure(.negative)
        }
        if parseUnbounded(t) != nil { return .failure(.tooLong) }
        return .failure(.notADuration)
    }

    /// Parses `3d`, `12h`, `90m`, `45s`, `300ms` (or a plain number of seconds); nil for anything else,
    /// a negative value, or more than ``maximum``.
    static func parse(_ text: String) -> TimeInterval? {
        guard let d = parseUnbounded(text), d <= maximum else { return nil }
        return d
    }

    private static func parseUnbounded(_ text: String) -> TimeInterval? {
        let t = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard let unit = t.last else { return nil }
        let factor: Double
        var number = String(t.dropLast())
        if t.hasSuffix("ms") { return Double(t.dropLast(2)).flatMap { $0 >= 0 && $0.isFinite ? $0 / 1000 : nil } }
        switch unit {
        case "d": factor = 86_400
        case "h": factor = 3600
        case "m": factor = 60
        case "s": factor = 1
        default:
            factor = 1
            number = t
        }
        guard let value = Double(number), value >= 0, value.isFinite, (value * factor).isFinite else { return nil }
        return value * factor
    }
}
