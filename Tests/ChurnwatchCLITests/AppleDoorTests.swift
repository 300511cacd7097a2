@testable import ChurnServe
import Foundation
import Logging
import Synchronization
import Testing

/// The door both Apple routes share: the same refusals for the same faults on either route.
struct AppleDoorTests {
    static func jws(_ payload: String) -> String {
        let b64 = Data(payload.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJFUzI1NiJ9.\(b64).c2ln"
    }

    static func body(_ payload: String) -> [UInt8] { Array("{\"signedPayload\":\"\(payload)\"}".utf8) }

    /// Admits with the route's own claim reader; the apps: "com.example.ok"/1 open, "com.example.broken"/2 misconfigured.
    static func admit(_ route: String, _ body: [UInt8], door: AppleDoor) async -> ServeResponse? {
        func find<K: Hashable & Sendable>(_ table: [K: AppLookup<String>]) -> @Sendable (K) async -> AppLookup<String> {
            { table[$0] ?? .unknown }
        }
        let result = route == "notifications"
            ? await door.admit(body, claim: NotificationReceiver.claim,
                               find: find(["com.example.ok": .open("ok"), "com.example.broken": .misconfigured("its key file is missing")]))
            : await door.admit(body, claim: RetentionAnswerer.claim, find: find([Int64(1): .open("ok"), 2: .misconfigured("its key file is missing")]))
        switch result {
        case .success: return nil
        case .failure(let refusal): return refusal.response
        }
    }

    @Test("each fault gets the same status and reason on both routes: a bad body 400, a payload that is no JWS of JSON 403 'did not verify', no app or an unknown one 403, an app whose settings cannot be used 503; each refusal counted by its reason")
    func sameRefusalsOnBothRoutes() async {
        for route in ["notifications", "retention"] {
            let counted = Mutex<[String]>([])
            let door = AppleDoor(noun: "x", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }) { r in counted.withLock { $0.append(r) } }
            let claim = { (app: String, id: Int) in
                Self.jws(route == "notifications" ? #"{"data":{"bundleId":"\#(app)"}}"# : #"{"appAppleId":\#(id)}"#)
            }
            let truncated = String(claim("com.example.ok", 1).prefix(30)) + ".c2ln"
            let cases: [([UInt8], Int?, String)] = [
                (Array("not json".utf8), 400, "body"),
                (Self.body(truncated), 403, "verification"),
                (Self.body("only.two"), 403, "verification"),
                // Valid base64url of a JSON text cut short: unreadable, not "no app".
                (Self.body(Self.jws(#"{"data":{"bun"#)), 403, "verification"),
                (Self.body(Self.jws(#"{"data":{}}"#)), 403, "unknown_app"),
                (Self.body(claim("com.example.other", 3)), 403, "unknown_app"),
                (Self.body(claim("com.example.broken", 2)), 503, "misconfigured_app"),
                (Self.body(claim("com.example.ok", 1)), nil, ""),
            ]
            for (body, status, _) in cases {
                let answer = await Self.admit(route, body, door: door)
                #expect(answer?.status == status, "\(route) \(String(decoding: body, as: UTF8.self).prefix(80)): \(String(describing: answer))")
                if status == 403, let text = answer?.body {
                    #expect(text.contains("did not verify") || text.contains("names no app"), "\(text)")
                }
            }
            #expect(counted.withLock { $0 } == cases.filter { $0.1 != nil }.map(\.2), "\(route)")
        }
    }
}
