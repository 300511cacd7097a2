import AppStoreModels
import Foundation

// Dates cross the wire as Apple sends them: Int64 milliseconds since 1970-01-01T00:00:00Z, in
// AppStoreModels' `EpochMilliseconds` (one type, one rounding). Encoding them ourselves keeps
// stored JSON independent of the encoder's date strategy.

extension EpochMilliseconds {
    /// ISO 8601 in UTC with milliseconds, for event details read by people and SQL.
    static func text(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}

extension KeyedEncodingContainer {
    mutating func encodeMilliseconds(_ date: Date?, forKey key: Key) throws {
        try encodeIfPresent(date.map { EpochMilliseconds($0) }, forKey: key)
    }
}

extension KeyedDecodingContainer {
    func decodeMilliseconds(forKey key: Key) throws -> Date? {
        try decodeIfPresent(EpochMilliseconds.self, forKey: key)?.date
    }
}
