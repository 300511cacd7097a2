import Foundation

/// What an inbox row's payload says about its app before it is verified: only to hand the row
/// to that app's sync, which verifies it like any other (a claim nobody verified decides
/// nothing else).
enum InboxPayload {
    /// `data.bundleId` of a notification's JWS payload; nil when it cannot be read.
    static func claimedBundleId(_ jws: String) -> String? {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].count <= 1 << 20 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let payload = object["data"] as? [String: Any] else { return nil }
        return payload["bundleId"] as? String
    }
}
