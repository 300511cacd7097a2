import Crypto
import Foundation

/// A payload that failed verification, kept for inspection and never trusted.
///
/// What is kept is bounded, whatever a server sends: the first ``maxPayloadBytes`` of the
/// payload (a real signed payload with its certificate chain is about 5 KB, so Apple's are kept
/// whole) and ``maxReasonBytes`` of the reason. A longer payload's reason ends with its full
/// length and SHA-256, to match it against a capture. NUL characters, which PostgreSQL's text
/// cannot hold, become U+FFFD.
public struct QuarantinedPayload: Sendable {
    public static let maxPayloadBytes = 64 * 1024
    public static let maxReasonBytes = 1024

    public var endpoint: String
    public var reason: String
    public var payload: String

    public init(endpoint: String, reason: String, payload: String) {
        self.endpoint = endpoint
        var reason = Self.storable(reason, maxBytes: Self.maxReasonBytes)
        let bytes = payload.utf8.count
        if bytes > Self.maxPayloadBytes {
            reason += " [payload of \(bytes) bytes, sha256 \(Self.sha256Hex(payload)); the first \(Self.maxPayloadBytes) kept]"
        }
        self.reason = reason
        self.payload = Self.storable(payload, maxBytes: Self.maxPayloadBytes)
    }

    /// The SHA-256 of a payload as lowercase hex: how a payload is matched against a capture, and
    /// how one that failed verification is recognised when it comes again (it has no identity
    /// anyone verified).
    public static func sha256Hex(_ payload: String) -> String {
        SHA256.hash(data: Data(payload.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// At most `maxBytes` of UTF-8 (cut at a character boundary), without NUL.
    static func storable(_ text: String, maxBytes: Int) -> String {
        var out = String.UnicodeScalarView()
        var size = 0
        for scalar in text.unicodeScalars {
            let s: Unicode.Scalar = scalar == "\u{0}" ? "\u{FFFD}" : scalar
            size += UTF8.width(s)
            guard size <= maxBytes else { break }
            out.append(s)
        }
        return String(out)
    }
}
