import Foundation

/// Dates cross the wire as Apple sends them: Int64 milliseconds since 1970-01-01T00:00:00Z.
/// Encoding them ourselves keeps stored JSON independent of the encoder's date strategy.
enum EpochMilliseconds {
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// ISO 8601 in UTC with milliseconds, for event details read by people and SQL.
    static func text(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

extension KeyedEncodingContainer {
    mutating func encodeMilliseconds(_ date: Date?, forKey key: Key) throws {
        try encodeIfPresent(date.map(EpochMilliseconds.milliseconds), forKey: key)
    }
}

extension KeyedDecodingContainer {
    func decodeMilliseconds(forKey key: Key) throws -> Date? {
        try decodeIfPresent(Int64.self, forKey: key).map(EpochMilliseconds.date)
    }
}
