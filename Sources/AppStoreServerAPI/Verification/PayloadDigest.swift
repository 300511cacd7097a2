import Crypto
import Foundation

/// The SHA-256 of a signed payload as lowercase hex: how a payload that failed verification is
/// recognised when it comes again (it has no identity anyone verified).
public enum PayloadDigest {
    public static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
