import ChurnStore
import Foundation
import Testing

@Suite("QuarantinedPayload bounds (issue 18 item 9)")
struct QuarantineBoundsTests {
    @Test("a 1 MB hostile payload is kept as its first 64 KiB with its length and SHA-256")
    func oversizedPayload() throws {
        let header = String(repeating: "A", count: 1_000_000)
        let payload = header + ".eyJ9.sig"
        let q = QuarantinedPayload(endpoint: "status", reason: "header of 1000000 bytes is too large", payload: payload)
        #expect(q.payload.utf8.count == QuarantinedPayload.maxPayloadBytes)
        #expect(payload.hasPrefix(q.payload))
        #expect(q.reason.hasPrefix("header of 1000000 bytes is too large [payload of 1000009 bytes, sha256 "), "\(q.reason)")
        let digest = try #require(q.reason.split(separator: " ").drop { $0 != "sha256" }.dropFirst().first)
        #expect(digest.count == 65 && digest.hasSuffix(";") && digest.dropLast().allSatisfy(\.isHexDigit), "\(digest)")
    }

    @Test("an ordinary payload is kept whole; reasons are bounded; NUL (which PostgreSQL's text refuses) is replaced")
    func ordinaryAndHostileText() {
        let jws = String(repeating: "x", count: 5000)
        let q = QuarantinedPayload(endpoint: "history", reason: "invalid signature", payload: jws)
        #expect(q.payload == jws)
        #expect(q.reason == "invalid signature")
        let hostile = QuarantinedPayload(endpoint: "status", reason: "bundleId '" + String(repeating: "é", count: 5000) + "'", payload: "a\u{0}b")
        #expect(hostile.reason.utf8.count <= QuarantinedPayload.maxReasonBytes)
        #expect(hostile.payload == "a\u{FFFD}b")
    }
}
