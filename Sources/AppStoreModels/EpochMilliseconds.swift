import Foundation

/// A moment as Apple sends it: an integer number of milliseconds since 1970-01-01T00:00:00Z.
///
/// Encodes and decodes as a bare JSON integer, so the wire form is unchanged; ``date`` is the
/// Foundation view. Keeping the integer avoids the rounding a `Double`-based `Date` would add
/// when a value is stored and compared again.
public struct EpochMilliseconds: RawRepresentable, Codable, Hashable, Comparable, Sendable,
    ExpressibleByIntegerLiteral, CustomStringConvertible
{
    /// Milliseconds since 1970 (UTC).
    public var rawValue: Int64

    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ milliseconds: Int64) { self.rawValue = milliseconds }
    public init(integerLiteral value: Int64) { self.rawValue = value }
    /// The date rounded to the nearest whole millisecond.
    ///
    /// To the nearest, not down: a `Date` made from Apple's milliseconds holds them as a binary
    /// fraction of a second (counted from 2001), so multiplying back can land a hair below the
    /// integer (1096484645751 ms, in 2004, comes back as 1096484645750.9999); truncating would
    /// then move Apple's moment one millisecond earlier, and rounding gives it back exactly. For
    /// a moment read from a clock, either is within the millisecond Apple itself resolves.
    public init(_ date: Date) {
        self.rawValue = Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Milliseconds since 1970 (UTC); the same as ``rawValue``.
    public var milliseconds: Int64 { rawValue }
    /// The moment as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(rawValue) / 1000) }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(Int64.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(rawValue) }
}
