import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct VerifyReceiptTests {
    @Test func routingSecretAndStringTypedFields() async throws {
        let sim = try await SimHarness.start(subscribers: 1500) {
            $0.sandboxShare = 0.3
            $0.receiptShare = 0.3
        }
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let prod = try #require((0..<pop.count).first { !pop.isSandbox($0) && pop.receiptData($0) != nil && pop.state($0, at: pop.config.start).transactionCount > 1 })
        let sandbox = try #require((0..<pop.count).first { pop.isSandbox($0) && pop.receiptData($0) != nil })
        func call(_ i: Int, sandboxHost: Bool, password: String?) async throws -> SimHarness.Response {
            let body = try JSONEncoder().encode(VerifyReceiptRequest(receiptData: pop.receiptData(i)!, password: password))
            return try await sim.post("/verifyReceipt", sandbox: sandboxHost, body: body)
        }
        let secret = sim.identity.sharedSecret
        let ok = try await call(prod, sandboxHost: false, password: secret)
        #expect(ok.status == 200)
        let v = try ok.decode(VerifyReceiptResponse.self)
        #expect(v.status == 0)
        #expect(v.environment == "Production")
        #expect(v.latestReceiptInfo?.contains { $0.originalTransactionId == pop.originalTransactionId(prod) } == true)
        #expect(v.pendingRenewalInfo?.contains { $0.originalTransactionId == pop.originalTransactionId(prod) } == true)
        // Apple's string-typed values.
        let raw = try #require(ok.json as? [String: Any])
        let lri = try #require((raw["latest_receipt_info"] as? [[String: Any]])?.first)
        #expect(lri["expires_date_ms"] is String)
        #expect(lri["is_trial_period"] as? String == "true" || lri["is_trial_period"] as? String == "false")
        let pri = try #require((raw["pending_renewal_info"] as? [[String: Any]])?.first)
        #expect(pri["auto_renew_status"] as? String == "1" || pri["auto_renew_status"] as? String == "0")

        #expect(try await call(sandbox, sandboxHost: false, password: secret).decode(VerifyReceiptResponse.self).status == 21007)
        #expect(try await call(prod, sandboxHost: true, password: secret).decode(VerifyReceiptResponse.self).status == 21008)
        #expect(try await call(prod, sandboxHost: false, password: "00ff").decode(VerifyReceiptResponse.self).status == 21004)
        #expect(try await call(prod, sandboxHost: false, password: nil).decode(VerifyReceiptResponse.self).status == 21004)
        let sb = try await call(sandbox, sandboxHost: true, password: secret).decode(VerifyReceiptResponse.self)
        #expect(sb.status == 0)
        #expect(sb.environment == "Sandbox")
        let garbage = try await sim.post("/verifyReceipt", body: Data(#"{"receipt-data":"%%%","password":"x"}"#.utf8))
        #expect(try garbage.decode(VerifyReceiptResponse.self).status == 21002)
        let unknown = try await sim.post("/verifyReceipt", body: Data(#"{"receipt-data":"aGVsbG8gd29ybGQ=","password":"x"}"#.utf8))
        #expect(try unknown.decode(VerifyReceiptResponse.self).status == 21003)
    }
}
