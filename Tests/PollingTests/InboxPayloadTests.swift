import Foundation
@testable import Polling
import Testing

/// The inbox is one for every app: a row goes to the sync of the app its payload names.
@Suite struct InboxPayloadTests {
    static func jws(_ payload: String) -> String {
        let body = Data(payload.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJFUzI1NiJ9.\(body).c2ln"
    }

    @Test("the bundle id a notification names, read without verifying, base64url without padding; nil for anything else")
    func claimedBundleId() {
        #expect(InboxPayload.claimedBundleId(Self.jws(#"{"notificationType":"DID_RENEW","data":{"bundleId":"com.example.app2"}}"#)) == "com.example.app2")
        // Lengths that need one and two padding characters.
        #expect(InboxPayload.claimedBundleId(Self.jws(#"{"data":{"bundleId":"a.b"}}"#)) == "a.b")
        #expect(InboxPayload.claimedBundleId(Self.jws(#"{"data":{"bundleId":"a.bc"}} "#)) == "a.bc")
        #expect(InboxPayload.claimedBundleId(Self.jws(#"{"data": {"bundleId" : "x.y", "status": 1}}"#)) == "x.y")
        #expect(InboxPayload.claimedBundleId(Self.jws(#"{"data":{}}"#)) == nil)
        #expect(InboxPayload.claimedBundleId(Self.jws("not json")) == nil)
        #expect(InboxPayload.claimedBundleId("only.two") == nil)
        #expect(InboxPayload.claimedBundleId("a.!!!.c") == nil)
    }
}
