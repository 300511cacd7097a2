@testable import AppStoreServerAPI
import Crypto
import Foundation
import Testing

@Suite("churnwatch inspect")
struct InspectorTests {
    let pki: TestPKI
    let responses: Responses
    let inspector: Inspector

    init() throws {
        pki = try TestPKI()
        responses = Responses(pki: pki)
        inspector = Inspector(configuration: TestConfiguration.make(pki: pki))
    }

    func object(_ report: InspectionReport) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(report.json.utf8)) as? [String: Any])
    }

    @Test func genuineTransactionVerifies() async throws {
        let report = await inspector.inspect(try pki.sign(Payloads.transaction()) + "\n")
        #expect(report.verdict == .verified && report.exitCode == 0, "\(report.verdictLine)")
        #expect(report.verdictLine == "verdict: verified (1 signed payload)")
        let doc = try object(report)
        let item = try #require((doc["signedData"] as? [[String: Any]])?.first)
        #expect(item["verified"] as? Bool == true && item["type"] as? String == "transaction")
        #expect((item["payload"] as? [String: Any])?["transactionId"] as? String == "2000000000000002")
        #expect((item["dates"] as? [String: Any])?["signedDate"] as? String == "2024-06-01T00:00:00.000Z")
        let x5c = try #require((item["header"] as? [String: Any])?["x5c"] as? [[String: Any]])
        #expect((x5c[0]["subject"] as? String)?.contains("Receipt Signing") == true)
    }

    @Test func rogueTruncatedAndForeignAreRejected() async throws {
        let rogue = await inspector.inspect(try TestPKI().sign(Payloads.transaction()))
        #expect(rogue.verdict == .rejected && rogue.exitCode == 1)
        #expect(rogue.reason?.contains("does not lead to a configured root") == true)
        let item = try #require((try object(rogue)["signedData"] as? [[String: Any]])?.first)
        #expect(item["payload"] == nil && item["unverifiedPayload"] != nil)
        #expect(item["appleStatus"] as? String == "VERIFICATION_FAILURE")

        let genuine = try pki.sign(Payloads.transaction())
        for truncated in [String(genuine.dropLast(10)), String(genuine.prefix(genuine.count / 2)), String(genuine[..<genuine.lastIndex(of: ".")!])] {
            let report = await inspector.inspect(truncated)
            #expect(report.verdict == .rejected && report.exitCode != 0, "\(truncated.suffix(12))")
        }

        let foreign = await inspector.inspect(try pki.sign(Payloads.transaction(bundleId: "com.evil.app")))
        #expect(foreign.verdict == .rejected && foreign.reason?.contains("com.evil.app") == true)
        let sandbox = await inspector.inspect(try pki.sign(Payloads.transaction(environment: .sandbox)))
        #expect(sandbox.verdict == .rejected && sandbox.reason?.contains("environment") == true)
        let sandboxInspector = Inspector(configuration: TestConfiguration.make(pki: pki), environment: .sandbox)
        #expect(await sandboxInspector.inspect(try pki.sign(Payloads.transaction(environment: .sandbox))).verdict == .verified)
    }

    @Test func garbageIsRejected() async throws {
        for input in ["", "hello", "{not json", "[1,2]", #"{"foo": 1}"#, "a.b.c"] {
            let report = await inspector.inspect(input)
            #expect(report.verdict == .rejected && report.exitCode == 1, "\(input)")
        }
    }

    @Test func wholeResponsesVerify() async throws {
        let status = String(decoding: try JSONEncoder().encode(try responses.status()), as: UTF8.self)
        let report = await inspector.inspect(status)
        #expect(report.verdict == .verified && report.signedCount == 2, "\(report.verdictLine)")
        #expect(try object(report)["kind"] as? String == "statusResponse")

        let history = String(decoding: try JSONEncoder().encode(try responses.history(page: 0, of: 1, perPage: 3)), as: UTF8.self)
        let h = await inspector.inspect(history)
        #expect(h.verdict == .verified && h.signedCount == 3)

        var tampered = try responses.status()
        tampered.data?[0].lastTransactions?[0].signedRenewalInfo = try TestPKI().sign(Payloads.renewal())
        let t = await inspector.inspect(String(decoding: try JSONEncoder().encode(tampered), as: UTF8.self))
        #expect(t.verdict == .rejected && t.reason?.hasPrefix("data[0].lastTransactions[0].signedRenewalInfo") == true)

        let info = String(decoding: try JSONEncoder().encode(TransactionInfoResponse(signedTransactionInfo: try pki.sign(Payloads.transaction()))), as: UTF8.self)
        #expect(await inspector.inspect(info).verdict == .verified)
    }

    @Test func notificationsAreCheckedLikeApplesLibrary() async throws {
        func notification(appAppleId: Int64, bundleId: String = Payloads.bundleId) throws -> String {
            let payload: JSONValue = .object([
                "notificationType": .string("DID_CHANGE_RENEWAL_STATUS"), "subtype": .string("AUTO_RENEW_DISABLED"),
                "notificationUUID": .string(UUID().uuidString), "version": .string("2.0"),
                "signedDate": .integer(TestPKI.signedDate.rawValue),
                "data": .object([
                    "appAppleId": .integer(appAppleId), "bundleId": .string(bundleId), "environment": .string("Production"),
                    "signedTransactionInfo": .string(try pki.sign(Payloads.transaction())),
                    "signedRenewalInfo": .string(try pki.sign(Payloads.renewal(autoRenew: .off))),
                ]),
            ])
            return try pki.sign(payload)
        }
        let good = await inspector.inspect(#"{"signedPayload":"\#(try notification(appAppleId: 1_234_567_890))"}"#)
        #expect(good.verdict == .verified && good.signedCount == 3, "\(good.verdictLine)")
        let wrongApp = await inspector.inspect(try notification(appAppleId: 42))
        #expect(wrongApp.verdict == .rejected)
        let wrongBundle = await inspector.inspect(try notification(appAppleId: 1_234_567_890, bundleId: "com.evil.app"))
        #expect(wrongBundle.verdict == .rejected)
    }

    @Test func readsArgumentsFilesAndStandardInput() throws {
        let jws = try pki.sign(Payloads.transaction())
        #expect(try Inspector.readInput(jws) == jws)
        #expect(try Inspector.readInput("-", standardInput: { Data(jws.utf8) }) == jws)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cw-inspect-\(UUID().uuidString).jws")
        try Data(jws.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(try Inspector.readInput(url.path) == jws)
    }

    @Test func subscriptionFromApple() async throws {
        let clock = TestClock()
        let sandboxStatus = try responses.status(environment: .sandbox)
        let sandboxHistory = try responses.history(page: 0, of: 1, environment: .sandbox)
        let transport = ScriptedTransport(clock: clock) { request, _ in
            if request.url.host == "prod.test" { return ScriptedTransport.error(404, 4_040_010) }
            return request.url.path.contains("/history/") ? ScriptedTransport.json(200, sandboxHistory) : ScriptedTransport.json(200, sandboxStatus)
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let inspector = Inspector(configuration: client.configuration, client: client)
        let report = await inspector.inspectSubscription("2000000000000001")
        #expect(report.verdict == .verified && report.exitCode == 0, "\(report.verdictLine)")
        let doc = try object(report)
        #expect(doc["environment"] as? String == "Sandbox")
        #expect((doc["subscriptions"] as? [[String: Any]])?.first?["statusName"] as? String == "active")
        #expect(((doc["history"] as? [String: Any])?["transactions"] as? [Any])?.count == 2)
        #expect(transport.requests.allSatisfy { $0.method == "GET" })

        let limited = ScriptedTransport(clock: clock) { _, _ in
            ScriptedTransport.error(429, 4_290_000, headers: ["Retry-After": String(Int64(clock.now().timeIntervalSince1970 * 1000) + 86_400_000)])
        }
        let c2 = TestConfiguration.client(pki: pki, transport: limited, clock: clock)
        let r2 = await Inspector(configuration: c2.configuration, client: c2).inspectSubscription("1")
        #expect(r2.verdict == .unavailable && r2.exitCode == 69)

        let refused = ScriptedTransport(clock: clock) { _, _ in HTTPResponse(status: 401) }
        let c3 = TestConfiguration.client(pki: pki, transport: refused, clock: clock)
        let r3 = await Inspector(configuration: c3.configuration, client: c3).inspectSubscription("1")
        #expect(r3.exitCode == 78 && r3.reason?.contains("Apple rejected the API key") == true)

        let unknown = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(404, 4_040_010) }
        let c4 = TestConfiguration.client(pki: pki, transport: unknown, clock: clock)
        let r4 = await Inspector(configuration: c4.configuration, client: c4).inspectSubscription("1")
        #expect(r4.verdict == .notFound && r4.exitCode == 1)
    }
}
