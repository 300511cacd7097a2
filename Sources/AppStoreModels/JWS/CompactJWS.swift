import Foundation

/// A compact-serialized JWS (`header.payload.signature`), split and base64url-decoded but
/// **not verified**. Nothing here checks a signature; it only parses.
public struct CompactJWS: Sendable {
    /// Why a string is not a compact JWS.
    public enum ParseError: Error, Hashable, Sendable {
        /// Not exactly three dot-separated parts.
        case wrongPartCount(Int)
        /// A part that is empty or not strict base64url (0 header, 1 payload, 2 signature).
        case invalidBase64URL(part: Int)
        /// The header is larger than the limit given to the parser.
        case headerTooLarge(Int)
    }

    /// The decoded header bytes (JSON).
    public let headerBytes: [UInt8]
    /// The decoded payload bytes (JSON for App Store payloads).
    public let payloadBytes: [UInt8]
    /// The decoded signature (64 bytes `R||S` for ES256).
    public let signature: [UInt8]
    /// The bytes that were signed: ASCII `base64url(header) + "." + base64url(payload)`.
    public let signingInput: [UInt8]

    /// Splits and decodes `compact`. `maxHeaderBytes` bounds the encoded header (a real App Store
    /// header with three certificates is about 4 KB).
    public init(_ compact: String, maxHeaderBytes: Int = 16 * 1024) throws(ParseError) {
        var utf8 = Array(compact.utf8)
        let found = utf8.withUnsafeBufferPointer { Self.dots(in: $0) }
        guard let (d1, d2) = found else { throw .wrongPartCount(utf8.withUnsafeBufferPointer { Self.partCount(in: $0) }) }
        guard d1 <= maxHeaderBytes else { throw .headerTooLarge(d1) }
        let parts = utf8.withUnsafeMutableBufferPointer { buf -> ([UInt8]?, [UInt8]?, [UInt8]?) in
            let base = UnsafeBufferPointer(buf)
            func dec(_ r: Range<Int>) -> [UInt8]? {
                guard !r.isEmpty else { return nil }
                return Base64URL.decode(utf8: UnsafeBufferPointer(rebasing: base[r]), table: Base64URL.urlTable, allowPadding: false)
            }
            return (dec(0..<d1), dec(d1 + 1..<d2), dec(d2 + 1..<base.count))
        }
        guard let h = parts.0 else { throw .invalidBase64URL(part: 0) }
        guard let p = parts.1 else { throw .invalidBase64URL(part: 1) }
        guard let s = parts.2 else { throw .invalidBase64URL(part: 2) }
        headerBytes = h
        payloadBytes = p
        signature = s
        utf8.removeSubrange(d2...)
        signingInput = utf8
    }

    /// The positions of the two dots of a compact JWS; nil unless there are exactly two. (memchr:
    /// a notification's JWS is kilobytes long and holds two others, whose dots are in base64.)
    public static func dots(in utf8: UnsafeBufferPointer<UInt8>) -> (first: Int, second: Int)? {
        func dot(after start: Int) -> Int? {
            guard start < utf8.count, let base = utf8.baseAddress,
                  let hit = memchr(base + start, Int32(UInt8(ascii: ".")), utf8.count - start) else { return nil }
            return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
        }
        guard let first = dot(after: 0), let second = dot(after: first + 1), dot(after: second + 1) == nil else { return nil }
        return (first, second)
    }

    /// How many dot-separated parts `utf8` has (for the error when it is not three).
    public static func partCount(in utf8: UnsafeBufferPointer<UInt8>) -> Int {
        utf8.reduce(1) { $0 + ($1 == UInt8(ascii: ".") ? 1 : 0) }
    }

    /// Decodes the header JSON.
    public func decodeHeader() throws -> JWSHeader {
        try JSONDecoder().decode(JWSHeader.self, from: Data(headerBytes))
    }

    /// Decodes the payload JSON as `T`. The result is unverified.
    public func decodePayload<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(payloadBytes))
    }

    /// `base64url(header) + "." + base64url(payload)`: the input to sign when producing a JWS.
    public static func signingInput(header: some Encodable, payload: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let h = try encoder.encode(header)
        let p = try encoder.encode(payload)
        return Base64URL.encode(h) + "." + Base64URL.encode(p)
    }

    /// Appends a signature to a signing input: `signingInput + "." + base64url(signature)`.
    public static func serialize(signingInput: String, signature: some Collection<UInt8>) -> String {
        signingInput + "." + Base64URL.encode(signature)
    }
}
