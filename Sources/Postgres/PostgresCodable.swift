import Foundation

/// A Swift value that can be bound as a query parameter.
public protocol PostgresEncodable: Sendable {
    /// The PostgreSQL type of this Swift type (also used for NULLs of it).
    static var postgresType: UInt32 { get }
    /// The value in PostgreSQL's text input format.
    var postgresText: String { get }
    /// Type and text together; NULL for an absent optional. (A requirement, so that calls
    /// through generics and existentials reach Optional's own implementation.)
    var postgresBind: PostgresBind { get }
}

extension PostgresEncodable {
    @inlinable
    public var postgresBind: PostgresBind { PostgresBind(oid: Self.postgresType, text: postgresText) }
}

/// A Swift value that can be read from a result column in text format.
public protocol PostgresDecodable {
    /// Decodes from the column's text; throws `PostgresDecodingFailure` when it doesn't fit.
    static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Self
    /// The value for SQL NULL; non-optional types throw.
    static func decodeNull() throws -> Self
}

extension PostgresDecodable {
    public static func decodeNull() throws -> Self {
        throw PostgresDecodingFailure("unexpected NULL")
    }
}

/// Why a column's text did not decode; the row adds the column name and type.
public struct PostgresDecodingFailure: Error, Sendable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

// MARK: - Optional

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public static var postgresType: UInt32 { Wrapped.postgresType }
    @inlinable
    public var postgresText: String { self?.postgresText ?? "" }
    @inlinable
    public var postgresBind: PostgresBind {
        PostgresBind(oid: Wrapped.postgresType, text: self?.postgresText)
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Self {
        try Wrapped.decode(postgresText: bytes)
    }
    public static func decodeNull() throws -> Self { nil }
}

// MARK: - Text

extension String: PostgresEncodable, PostgresDecodable {
    /// Untyped, so the server infers the column's type (text, varchar, an enum, ...).
    public static var postgresType: UInt32 { PostgresOID.unknown }
    public var postgresText: String { self }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}

// MARK: - Integers

private func parseInteger(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
    var i = 0
    let n = bytes.count
    guard n > 0 else { return nil }
    var negative = false
    if bytes[0] == 0x2D { negative = true; i = 1 } else if bytes[0] == 0x2B { i = 1 }
    guard i < n else { return nil }
    var value: Int64 = 0
    while i < n {
        let c = bytes[i]
        guard c >= 0x30 && c <= 0x39 else { return nil }
        let digit = Int64(c - 0x30)
        // Accumulate negatively so Int64.min fits.
        let (m, o1) = value.multipliedReportingOverflow(by: 10)
        let (s, o2) = m.subtractingReportingOverflow(digit)
        guard !o1 && !o2 else { return nil }
        value = s
        i += 1
    }
    if negative { return value }
    let (pos, o) = Int64(0).subtractingReportingOverflow(value)
    return o ? nil : pos
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.int8 }
    public var postgresText: String { String(self) }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Int64 {
        guard let v = parseInteger(bytes) else { throw PostgresDecodingFailure("not an integer") }
        return v
    }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.int8 }
    public var postgresText: String { String(self) }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Int {
        guard let v = parseInteger(bytes), let i = Int(exactly: v) else {
            throw PostgresDecodingFailure("not an integer")
        }
        return i
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.int4 }
    public var postgresText: String { String(self) }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Int32 {
        guard let v = parseInteger(bytes) else { throw PostgresDecodingFailure("not an integer") }
        guard let i = Int32(exactly: v) else { throw PostgresDecodingFailure("out of range for Int32") }
        return i
    }
}

extension Int16: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.int2 }
    public var postgresText: String { String(self) }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Int16 {
        guard let v = parseInteger(bytes) else { throw PostgresDecodingFailure("not an integer") }
        guard let i = Int16(exactly: v) else { throw PostgresDecodingFailure("out of range for Int16") }
        return i
    }
}

// MARK: - Bool, Double

extension Bool: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.bool }
    public var postgresText: String { self ? "t" : "f" }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Bool {
        if bytes.count == 1 {
            if bytes[0] == 0x74 { return true }
            if bytes[0] == 0x66 { return false }
        }
        throw PostgresDecodingFailure("not a boolean")
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.float8 }
    public var postgresText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return "\(self)"
    }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Double {
        guard let v = Double(String(decoding: bytes, as: UTF8.self)) else {
            throw PostgresDecodingFailure("not a number")
        }
        return v
    }
}

// MARK: - Date, UUID, Data

extension Date: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.timestamptz }
    public var postgresText: String { PostgresTimestamp.format(self) }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Date {
        guard let d = PostgresTimestamp.parse(bytes) else {
            throw PostgresDecodingFailure("not an ISO timestamp with time zone")
        }
        return d
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.uuid }
    public var postgresText: String { uuidString.lowercased() }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> UUID {
        guard let u = UUID(uuidString: String(decoding: bytes, as: UTF8.self)) else {
            throw PostgresDecodingFailure("not a UUID")
        }
        return u
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: return c - 0x30
    case 0x61...0x66: return c - 0x61 + 10
    case 0x41...0x46: return c - 0x41 + 10
    default: return nil
    }
}

extension Data: PostgresEncodable, PostgresDecodable {
    public static var postgresType: UInt32 { PostgresOID.bytea }
    public var postgresText: String {
        var out = [UInt8]()
        out.reserveCapacity(2 + count * 2)
        out.append(0x5C); out.append(0x78) // \x
        for b in self {
            out.append(hexDigits[Int(b >> 4)])
            out.append(hexDigits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> Data {
        guard bytes.count >= 2, bytes[0] == 0x5C, bytes[1] == 0x78, bytes.count % 2 == 0 else {
            throw PostgresDecodingFailure("not bytea in hex format")
        }
        var out = Data(capacity: (bytes.count - 2) / 2)
        var i = 2
        while i < bytes.count {
            guard let hi = hexValue(bytes[i]), let lo = hexValue(bytes[i + 1]) else {
                throw PostgresDecodingFailure("not bytea in hex format")
            }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}

// MARK: - JSON

/// A jsonb value: its text. Bind with `PostgresJSON(encoding: value)`, read as
/// `PostgresJSON` and `.decode(T.self)`.
public struct PostgresJSON: PostgresEncodable, PostgresDecodable, Equatable {
    public var text: String

    public init(text: String) { self.text = text }

    public init(data: Data) { self.text = String(decoding: data, as: UTF8.self) }

    /// Encodes a value with sorted keys (stable text, stable diffs).
    public init<T: Encodable>(encoding value: T, encoder: JSONEncoder = PostgresJSON.defaultEncoder) throws {
        self.text = String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    public var data: Data { Data(text.utf8) }

    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: data)
    }

    public static var defaultEncoder: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }

    public static var postgresType: UInt32 { PostgresOID.jsonb }
    public var postgresText: String { text }
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> PostgresJSON {
        PostgresJSON(text: String(decoding: bytes, as: UTF8.self))
    }
}

// MARK: - Arrays

/// Element types that can live in a one-dimensional PostgreSQL array.
public protocol PostgresArrayElement: PostgresEncodable {
    static var postgresArrayType: UInt32 { get }
}

extension String: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.textArray } }
extension Int64: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.int8Array } }
extension Int: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.int8Array } }
extension Int32: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.int4Array } }
extension Bool: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.boolArray } }
extension Double: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.float8Array } }
extension Date: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.timestamptzArray } }
extension UUID: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.uuidArray } }
extension PostgresJSON: PostgresArrayElement { public static var postgresArrayType: UInt32 { PostgresOID.jsonbArray } }
extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    public static var postgresArrayType: UInt32 { Wrapped.postgresArrayType }
}

/// Writes one array element in array-literal syntax: quoted, `"` and `\` escaped, NULL bare.
@usableFromInline
func appendArrayElement(_ bind: PostgresBind, to out: inout [UInt8]) {
    guard let text = bind.text else {
        out.append(contentsOf: [0x4E, 0x55, 0x4C, 0x4C]) // NULL
        return
    }
    out.append(0x22)
    var utf8 = text
    utf8.withUTF8 { bytes in
        // Runs between the characters to escape are copied whole (JSON is full of quotes, but
        // most of its bytes are not).
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 0x22 || bytes[i] == 0x5C {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
            out.append(0x5C)
            start = i
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
    }
    out.append(0x22)
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    public static var postgresType: UInt32 { Element.postgresArrayType }
    /// Built on UTF-8 bytes: the batch writer binds arrays of thousands of values (inlinable,
    /// so that it is specialized for the element type where it is bound).
    @inlinable
    public var postgresText: String {
        var out: [UInt8] = [0x7B]
        out.reserveCapacity(count * 16 + 2)
        for i in indices {
            if i > startIndex { out.append(0x2C) }
            appendArrayElement(self[i].postgresBind, to: &out)
        }
        out.append(0x7D)
        return String(decoding: out, as: UTF8.self)
    }
}

extension Array: PostgresDecodable where Element: PostgresDecodable {
    /// Parses a one-dimensional array literal (`{a,"b c",NULL}`).
    public static func decode(postgresText bytes: UnsafeBufferPointer<UInt8>) throws -> [Element] {
        let n = bytes.count
        guard n >= 2, bytes[0] == 0x7B, bytes[n - 1] == 0x7D else {
            throw PostgresDecodingFailure("not a one-dimensional array")
        }
        var result: [Element] = []
        if n == 2 { return result }
        var i = 1
        var element: [UInt8] = []
        while i < n - 1 {
            element.removeAll(keepingCapacity: true)
            var quoted = false
            if bytes[i] == 0x22 { // "
                quoted = true
                i += 1
                while i < n - 1, bytes[i] != 0x22 {
                    if bytes[i] == 0x5C { i += 1 }
                    guard i < n - 1 else { break }
                    element.append(bytes[i])
                    i += 1
                }
                guard i < n - 1, bytes[i] == 0x22 else {
                    throw PostgresDecodingFailure("unterminated quoted array element")
                }
                i += 1
            } else {
                while i < n - 1, bytes[i] != 0x2C {
                    guard bytes[i] != 0x7B else { throw PostgresDecodingFailure("nested arrays are not supported") }
                    element.append(bytes[i])
                    i += 1
                }
            }
            if !quoted && element == [UInt8]("NULL".utf8) {
                result.append(try Element.decodeNull())
            } else {
                result.append(try element.withUnsafeBufferPointer { try Element.decode(postgresText: $0) })
            }
            if i < n - 1 {
                guard bytes[i] == 0x2C else { throw PostgresDecodingFailure("malformed array literal") }
                i += 1
            }
        }
        return result
    }
}
