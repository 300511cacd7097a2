// verifyReceipt sends numbers and booleans as strings ("1700000000000", "true", "1"). These
// helpers read either form and write Apple's string form back, so the legacy types decode
// Apple's JSON into typed values and a simulator can encode the same JSON again.

extension KeyedDecodingContainer {
    /// A string- or number-typed integer; `nil` when absent, `null` or empty.
    func decodeLegacyInt64(_ key: Key) throws -> Int64? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let s = try? decode(String.self, forKey: key) {
            if s.isEmpty { return nil }
            guard let v = Int64(s) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not an integer: \(s.prefix(32))")
            }
            return v
        }
        return try decode(Int64.self, forKey: key)
    }

    func decodeLegacyInt32(_ key: Key) throws -> Int32? {
        guard let v = try decodeLegacyInt64(key) else { return nil }
        guard let small = Int32(exactly: v) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "out of range")
        }
        return small
    }

    func decodeLegacyDate(_ key: Key) throws -> EpochMilliseconds? {
        try decodeLegacyInt64(key).map(EpochMilliseconds.init(rawValue:))
    }

    /// `"true"`/`"false"`, `"1"`/`"0"`, a JSON boolean or a number.
    func decodeLegacyBool(_ key: Key) throws -> Bool? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let b = try? decode(Bool.self, forKey: key) { return b }
        if let i = try? decode(Int64.self, forKey: key) { return i != 0 }
        let s = try decode(String.self, forKey: key)
        switch s.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        case "": return nil
        default:
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not a boolean: \(s.prefix(32))")
        }
    }
}

/// How a legacy boolean is spelled on the wire.
enum LegacyBoolStyle {
    /// `"true"` / `"false"` (latest_receipt_info).
    case word
    /// `"1"` / `"0"` (pending_renewal_info).
    case digit
}

extension KeyedEncodingContainer {
    mutating func encodeLegacy(_ value: Int64?, forKey key: Key) throws {
        if let value { try encode(String(value), forKey: key) }
    }
    mutating func encodeLegacy(_ value: Int32?, forKey key: Key) throws {
        if let value { try encode(String(value), forKey: key) }
    }
    mutating func encodeLegacy(_ value: EpochMilliseconds?, forKey key: Key) throws {
        if let value { try encode(String(value.rawValue), forKey: key) }
    }
    mutating func encodeLegacy(_ value: Bool?, style: LegacyBoolStyle, forKey key: Key) throws {
        guard let value else { return }
        switch style {
        case .word: try encode(value ? "true" : "false", forKey: key)
        case .digit: try encode(value ? "1" : "0", forKey: key)
        }
    }
}
