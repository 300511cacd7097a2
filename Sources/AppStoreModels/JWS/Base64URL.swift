import Foundation

/// Base64url without padding (RFC 7515 §2, RFC 4648 §5), as used by every JWS/JWT part.
///
/// Decoding is strict: only the URL-safe alphabet, no padding, no whitespace, and no
/// non-zero bits left over in the last character. Standard Base64 (for `x5c` certificates) is
/// ``decodeStandard(_:)``.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static let urlTable: [UInt8] = makeTable(alphabet)
    static let standardTable: [UInt8] = makeTable(standardAlphabet)

    private static func makeTable(_ alphabet: [UInt8]) -> [UInt8] {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        return t
    }

    /// Encodes bytes as unpadded base64url.
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var it = bytes.makeIterator()
        while let b0 = it.next() {
            let b1 = it.next()
            let b2 = it.next()
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 {
                out.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
                if let b2 { out.append(alphabet[Int(b2 & 0x3F)]) }
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Encodes a string's UTF-8 bytes as unpadded base64url.
    public static func encode(_ string: String) -> String { encode(Array(string.utf8)) }

    /// Decodes unpadded base64url; `nil` for any character outside the alphabet, padding,
    /// an impossible length or non-canonical trailing bits.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var text = String(text)
        return text.withUTF8 { decode(utf8: $0, table: urlTable, allowPadding: false) }
    }

    /// Decodes unpadded base64url from raw UTF-8 bytes (for example a slice of a compact JWS).
    public static func decode(utf8: ArraySlice<UInt8>) -> [UInt8]? {
        utf8.withUnsafeBufferPointer { decode(utf8: $0, table: urlTable, allowPadding: false) }
    }

    /// Decodes unpadded base64url from raw UTF-8 bytes.
    public static func decode(utf8: Slice<UnsafeBufferPointer<UInt8>>) -> [UInt8]? {
        decode(utf8: UnsafeBufferPointer(rebasing: utf8), table: urlTable, allowPadding: false)
    }

    /// Decodes standard Base64 (RFC 4648 §4) with optional `=` padding, as used by `x5c`.
    public static func decodeStandard(_ text: some StringProtocol) -> [UInt8]? {
        var text = String(text)
        return text.withUTF8 { decode(utf8: $0, table: standardTable, allowPadding: true) }
    }

    static func decode(utf8 input: UnsafeBufferPointer<UInt8>, table: [UInt8], allowPadding: Bool) -> [UInt8]? {
        var count = input.count
        if allowPadding && count > 0 && input[count - 1] == UInt8(ascii: "=") {
            guard count % 4 == 0 else { return nil }
            count -= 1
            if input[count - 1] == UInt8(ascii: "=") { count -= 1 }
        }
        if count % 4 == 1 { return nil }
        let capacity = count / 4 * 3 + max(0, count % 4 - 1)
        var valid = true
        // Written in place (no per-byte append): verification decodes every part of every JWS.
        let out = [UInt8](unsafeUninitializedCapacity: capacity) { out, written in
            table.withUnsafeBufferPointer { t in
                var i = 0, o = 0
                while i + 4 <= count {
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])]
                    let c = t[Int(input[i + 2])], d = t[Int(input[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 { valid = false; return }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = b << 4 | c >> 2
                    out[o + 2] = c << 6 | d
                    i += 4
                    o += 3
                }
                let rest = count - i
                if rest == 2 {
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])]
                    if (a | b) & 0xC0 != 0 || b & 0x0F != 0 { valid = false; return }
                    out[o] = a << 2 | b >> 4
                    o += 1
                } else if rest == 3 {
                    let a = t[Int(input[i])], b = t[Int(input[i + 1])], c = t[Int(input[i + 2])]
                    if (a | b | c) & 0xC0 != 0 || c & 0x03 != 0 { valid = false; return }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = b << 4 | c >> 2
                    o += 2
                }
                written = o
            }
        }
        return valid ? out : nil
    }
}
