import Foundation

/// JSON as churnwatch prints it for scripts: sorted keys, one value per line, times in ISO 8601
/// UTC (fractional seconds only when there are any).
enum JSONOutput {
    static func line<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(isoTime(date))
        }
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// `2026-11-21T02:00:00Z`, or `2026-11-21T02:00:00.250Z` when the time has a fraction.
func isoTime(_ date: Date) -> String {
    let whole = date.timeIntervalSince1970.rounded(.down) == date.timeIntervalSince1970
    return date.ISO8601Format(Date.ISO8601FormatStyle(includingFractionalSeconds: !whole))
}
