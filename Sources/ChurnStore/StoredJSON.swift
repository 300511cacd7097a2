import Foundation
import Postgres

/// A JSON document as ChurnStore keeps it in a `jsonb` column (a run's parameters, a worker's
/// counters, a transaction's payload): its text. Build one with `StoredJSON(encoding:)`, read
/// one back with `decode(_:)`.
public struct StoredJSON: Sendable, Equatable {
    public var text: String

    public init(text: String) { self.text = text }

    public init(data: Data) { self.text = String(decoding: data, as: UTF8.self) }

    /// Encodes a value with sorted keys (stable text, stable diffs).
    public init<T: Encodable>(encoding value: T) throws {
        self.text = try PostgresJSON(encoding: value).text
    }

    /// An empty object, `{}`.
    public static let emptyObject = StoredJSON(text: "{}")

    public var data: Data { Data(text.utf8) }

    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: data)
    }
}

extension StoredJSON: PostgresEncodable, PostgresDecodable, PostgresArrayElement {
    public static var postgresType: UInt32 { PostgresJSON.postgresType }
    public static var postgresArrayType: UInt32 { PostgresJSON.postgresArrayType }
    public var postgresText: String { text }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> StoredJSON {
        StoredJSON(text: String(decoding: bytes, as: UTF8.self))
    }
}
