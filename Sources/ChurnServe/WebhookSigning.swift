import Crypto
import Foundation

/// Standard Webhooks' signature (spec/standard-webhooks.md): HMAC-SHA256, keyed with the secret's
/// bytes (base64 after `whsec_`), over `{webhook-id}.{webhook-timestamp}.{body}`; the header
/// lists `v1,<base64>` once per secret in force, space-separated (two during a rotation).
public enum WebhookSigning {
    /// A new secret: 32 random bytes from the system's CSPRNG, as `whsec_<base64>`.
    public static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return "whsec_" + Data(bytes).base64EncodedString()
    }

    /// The key bytes of `whsec_<base64>`; nil when it is not that.
    public static func key(_ secret: String) -> SymmetricKey? {
        guard secret.hasPrefix("whsec_"), let data = Data(base64Encoded: String(secret.dropFirst(6))), data.count >= 24 else { return nil }
        return SymmetricKey(data: data)
    }

    /// The `webhook-signature` value for `keys` (current first).
    public static func signature(id: String, timestamp: Int64, body: String, keys: [SymmetricKey]) -> String {
        var content = Data("\(id).\(timestamp).".utf8)
        content.append(Data(body.utf8))
        return keys.map { key in
            "v1," + Data(HMAC<SHA256>.authenticationCode(for: content, using: key)).base64EncodedString()
        }.joined(separator: " ")
    }

    /// A short fingerprint of a secret for lists and logs (never the secret): the first 8 hex
    /// digits of its SHA-256.
    public static func fingerprint(_ secret: String) -> String {
        SHA256.hash(data: Data(secret.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
    }
}
