@testable import AppStoreServerAPI
import AppStoreModels
@testable import ChurnStore
import Foundation
import Polling
import Testing

/// verifyReceipt as the fallback for an id the App Store Server API knows in neither
/// environment (issue 19, item 3), against a scripted Apple.
@Suite("SubscriptionPoller: the legacy receipt as a fallback")
struct SubscriptionPollerReceiptTests {
    @Test("an id unknown to the Server API in both environments is polled through its receipt, with exclude-old-transactions")
    func unknownIdFallsBackToTheReceipt() async throws {
        var fixture = try JSONSerialization.jsonObject(with: try Fixture.data("verify-receipt")) as! [String: Any]
        var receipt = fixture["receipt"] as! [String: Any]
        receipt["bundle_id"] = Payloads.bundleId
        fixture["receipt"] = receipt
        // The fixture's one transaction was upgraded away from and refunded: make it the current one.
        var info = (fixture["latest_receipt_info"] as! [[String: Any]])[0]
        info["is_upgraded"] = "false"
        info["cancellation_date_ms"] = nil
        info["cancellation_reason"] = nil
        fixture["latest_receipt_info"] = [info]
        let body = try JSONSerialization.data(withJSONObject: fixture)
        let transport = ScriptedTransport { request, _ in
            if request.url.path.hasSuffix("/verifyReceipt") { return HTTPResponse(status: 200, headers: [:], body: body) }
            return ScriptedTransport.error(404, 4_040_010)
        }
        let client = TestConfiguration.client(pki: try TestPKI(), transport: transport, clock: TestClock())
        let item = ClaimedItem(originalTransactionId: "1000000000000001", reason: "new", attempts: 1, environment: nil,
                               receiptData: "UkVDRUlQVA==", appAccountToken: nil, customerRef: nil, snapshot: nil, segment: nil,
                               latestTransactionId: nil, historyRevision: nil, liveEpisodes: [])
        let result = await SubscriptionPoller(client: client).poll(item, asOf: Date(timeIntervalSince1970: 1_700_000_000))
        guard case .polled(let polled) = result.write.outcome else {
            Issue.record("not polled: \(result.write.outcome)")
            return
        }
        #expect(result.calls[.subscriptionStatuses] == 2 && result.calls[.verifyReceipt] == 1, "\(result.calls)")
        #expect(polled.snapshot.originalTransactionId == "1000000000000001" && polled.snapshot.transactionId == "1000000000000003")
        #expect(result.write.learnedOriginalTransactionId == nil, "the id was known: nothing to re-key")
        let sent = try #require(transport.requests.first { $0.url.path.hasSuffix("/verifyReceipt") }?.body)
        let json = try #require(try JSONSerialization.jsonObject(with: sent) as? [String: Any])
        #expect(json["exclude-old-transactions"] as? Bool == true)
    }
}
