import AppStoreModels
import Foundation

/// What an inbox row's payload says about its app before it is verified: only to hand the row
/// to that app's sync, which verifies it like any other (a claim nobody verified decides
/// nothing else).
enum InboxPayload {
    /// `data.bundleId` of a notification's JWS payload; nil when it cannot be read. The payload
    /// segment is decoded and scanned for its `"bundleId"` member, not parsed whole: this runs
    /// for every notification serve receives and every inbox row a drain reads, and the whole
    /// parse (or Foundation's string replacing before it) was most of serve's CPU. The inner
    /// signed transaction and renewal info are base64url strings, so the payload's one plain
    /// `"bundleId"` is `data`'s (or, without data, a summary's, which names the app too).
    static func claimedBundleId(_ jws: String) -> String? {
        claim(jws).bundleId
    }

    /// Whether the payload segment decodes to a JSON object, and its `"bundleId"` when it has one.
    static func claim(_ jws: String) -> (readable: Bool, bundleId: String?) {
        var jws = jws
        return jws.withUTF8 { bytes -> (Bool, String?) in
            guard let first = bytes.firstIndex(of: UInt8(ascii: ".")),
                  let second = bytes[(first + 1)...].firstIndex(of: UInt8(ascii: ".")),
                  second - first - 1 <= 1 << 20,
                  let payload = Base64URL.decode(utf8: bytes[(first + 1)..<second]),
                  payload.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == UInt8(ascii: "{") else { return (false, nil) }
            return (true, bundleId(in: payload))
        }
    }

    /// The string value of the first `"bundleId"` member of a JSON text (escapes not decoded:
    /// a bundle id has none); nil when there is none.
    static func bundleId(in json: [UInt8]) -> String? {
        let key = Array("\"bundleId\"".utf8)
        var i = 0
        while i + key.count <= json.count {
            guard json[i] == key[0], json[i..<(i + key.count)].elementsEqual(key) else {
                i += 1
                continue
            }
            var j = i + key.count
            while j < json.count, json[j] == UInt8(ascii: " ") || json[j] == UInt8(ascii: ":") { j += 1 }
            guard j < json.count, json[j] == UInt8(ascii: "\"") else { return nil }
            let start = j + 1
            guard let end = json[start...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            return String(decoding: json[start..<end], as: UTF8.self)
        }
        return nil
    }
}
