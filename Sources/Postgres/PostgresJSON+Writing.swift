/// JSON written without an encoder, for the shapes the batch writers bind thousands of times.
extension PostgresJSON {
    /// A JSON object of string values, keys in sorted order (the same text as
    /// `PostgresJSON(encoding:)` gives a `[String: String]`).
    public init(object: [String: String]) {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(2 + object.count * 32)
        for (i, key) in object.keys.sorted().enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            Self.appendString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            Self.appendString(object[key]!, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        self.init(text: String(decoding: out, as: UTF8.self))
    }

    /// A JSON array of strings.
    public init(array: [String]) {
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, element) in array.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            Self.appendString(element, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        self.init(text: String(decoding: out, as: UTF8.self))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// A JSON string literal: `"` and `\` escaped, control characters as `\n`, `\t`, ... or
    /// `\u00XX`; everything else (non-ASCII included) as its UTF-8 bytes.
    static func appendString(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
