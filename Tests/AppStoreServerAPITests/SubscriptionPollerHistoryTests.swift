@testable import AppStoreServerAPI
import AppStoreModels
import ChurnModel
@testable import ChurnStore
import Foundation
import Polling
import Testing

/// The poller reads history through Apple's revision cursor and reports a refund of any
/// transaction history brings, not only the latest (issue 19, item 2). Apple is scripted over
/// the client's transport: each answer is chosen by the request's revision.
@Suite("SubscriptionPoller: history through the revision cursor")
struct SubscriptionPollerHistoryTests {
    static let otid = "2000000000000001"
    static let day: Int64 = 86_400_000
    /// 2024-03-15: the first purchase.
    static let t0: Int64 = 1_710_460_800_000
    let pki: TestPKI

    init() throws { pki = try TestPKI() }

    /// The k-th monthly period (k = 0 is the first purchase), optionally refunded.
    func transaction(_ k: Int64, revokedAt: Int64? = nil, signedDate: Int64 = TestPKI.signedDate.rawValue) -> JWSTransactionDecodedPayload {
        var t = Payloads.transaction(transactionId: String(Int64(Self.otid)! + k), originalTransactionId: Self.otid,
                                     signedDate: AppStoreModels.EpochMilliseconds(signedDate),
                                     expiresDate: AppStoreModels.EpochMilliseconds(Self.t0 + (k + 1) * 31 * Self.day))
        t.webOrderLineItemId = String(3_000_000_000_000_000 + k)
        t.purchaseDate = AppStoreModels.EpochMilliseconds(Self.t0 + k * 31 * Self.day)
        t.transactionReason = k == 0 ? .purchase : .renewal
        if let revokedAt {
            t.revocationDate = AppStoreModels.EpochMilliseconds(revokedAt)
            t.rawRevocationReason = 1
            t.rawRevocationType = "REFUND_FULL"
        }
        return t
    }

    func status(latest: JWSTransactionDecodedPayload) throws -> HTTPResponse {
        let item = LastTransactionsItem(rawStatus: 1, originalTransactionId: Self.otid,
                                        signedTransactionInfo: try pki.sign(latest),
                                        signedRenewalInfo: try pki.sign(Payloads.renewal(originalTransactionId: Self.otid)))
        return ScriptedTransport.json(200, StatusResponse(
            rawEnvironment: "Production", bundleId: Payloads.bundleId, appAppleId: 1_234_567_890,
            data: [SubscriptionGroupIdentifierItem(subscriptionGroupIdentifier: "21501453", lastTransactions: [item])]))
    }

    func history(_ transactions: [JWSTransactionDecodedPayload], revision: String) throws -> HTTPResponse {
        ScriptedTransport.json(200, HistoryResponse(
            revision: revision, hasMore: false, bundleId: Payloads.bundleId, appAppleId: 1_234_567_890,
            rawEnvironment: "Production", signedTransactions: try transactions.map { try pki.sign($0) }))
    }

    /// Polls once with Apple scripted by `answer(revision sent)` for history.
    func poll(_ item: ClaimedItem, latest: JWSTransactionDecodedPayload, asOf: Int64,
              history answer: @escaping @Sendable (String?) throws -> HTTPResponse) async throws
        -> (polled: PollWrite.Polled, historyQueries: [[(String, String)]])
    {
        let statusResponse = try status(latest: latest)
        let transport = ScriptedTransport { request, _ in
            if request.url.path.contains("/inApps/v2/history/") {
                return try answer(request.queryItems.first { $0.0 == "revision" }?.1)
            }
            return statusResponse
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: TestClock())
        let result = await SubscriptionPoller(client: client).poll(item, asOf: Date(timeIntervalSince1970: Double(asOf) / 1000))
        guard case .polled(let polled) = result.write.outcome else {
            throw CLIFailure("the poll failed: \(result.write.outcome)")
        }
        let queries = transport.requests.filter { $0.url.path.contains("/history/") }.map(\.queryItems)
        return (polled, queries)
    }

    static func item(after polled: PollWrite.Polled?, latest: String?) -> ClaimedItem {
        ClaimedItem(originalTransactionId: otid, reason: "period_end", attempts: 1, environment: .production, receiptData: nil,
                    appAccountToken: nil, customerRef: nil, snapshot: polled?.snapshot, segment: polled?.segment,
                    latestTransactionId: latest, historyRevision: polled?.historyRevision, liveEpisodes: [])
    }

    @Test("the stored revision goes back with the same filters; a refund of an earlier transaction is a refunded event naming it")
    func earlierRefundThroughTheCursor() async throws {
        let (t0, t1, t2) = (transaction(0), transaction(1), transaction(2))
        // First poll: a full read (no revision), which establishes the state and the cursor.
        let first = try await poll(Self.item(after: nil, latest: nil), latest: t1, asOf: Self.t0 + 40 * Self.day) { revision in
            #expect(revision == nil)
            return try history([t0, t1], revision: "rev-A")
        }
        #expect(first.polled.historyRevision == "rev-A" && first.polled.events.isEmpty)
        let firstQuery = try #require(first.historyQueries.first)
        #expect(firstQuery.contains { $0 == ("productType", "AUTO_RENEWABLE") } && !firstQuery.contains { $0.0 == "startDate" })

        // Renewal: the cursor returns what changed since: the renewal, and the first period refunded.
        let refundedAt = Self.t0 + 70 * Self.day
        let second = try await poll(Self.item(after: first.polled, latest: t1.transactionId), latest: t2, asOf: Self.t0 + 75 * Self.day) { revision in
            #expect(revision == "rev-A")
            return try history([transaction(0, revokedAt: refundedAt), t2], revision: "rev-B")
        }
        let query = try #require(second.historyQueries.first)
        #expect(query.contains { $0 == ("revision", "rev-A") } && query.contains { $0 == ("productType", "AUTO_RENEWABLE") })
        #expect(!query.contains { $0.0 == "startDate" }, "the same filters as the read that issued the revision")
        #expect(second.polled.historyRevision == "rev-B")
        let refund = try #require(second.polled.events.first { $0.type == .refunded }, "\(second.polled.events.map(\.type))")
        #expect(refund.details["transaction_id"] == t0.transactionId)
        #expect(refund.occurredAt == Date(timeIntervalSince1970: Double(refundedAt) / 1000))
        #expect(refund.details["occurred_at_basis"] == "revocationDate")
        #expect(second.polled.events.contains { $0.type == .renewed })
        #expect(second.polled.snapshot.revocationDate == nil, "the current period is not revoked")
    }

    @Test("a revision Apple rejects (InvalidRequestRevision) starts over with a full read, without repeating old refunds")
    func staleRevisionStartsOver() async throws {
        let (t0, t1, t2, t3) = (transaction(0), transaction(1), transaction(2), transaction(3, signedDate: TestPKI.signedDate.rawValue + 1000))
        let refundedAt = Self.t0 + 70 * Self.day
        let first = try await poll(Self.item(after: nil, latest: nil), latest: t2, asOf: Self.t0 + 75 * Self.day) { _ in
            try history([transaction(0, revokedAt: refundedAt), t1, t2], revision: "rev-A")
        }
        var stale = Self.item(after: first.polled, latest: t2.transactionId)
        stale.historyRevision = "rev-from-an-older-version"
        let second = try await poll(stale, latest: t3, asOf: Self.t0 + 100 * Self.day) { revision in
            if revision != nil { return ScriptedTransport.error(400, 4_000_005) }
            return try history([transaction(0, revokedAt: refundedAt), t1, t2, t3], revision: "rev-C")
        }
        #expect(second.historyQueries.count == 2)
        #expect(second.historyQueries.first?.contains { $0 == ("revision", "rev-from-an-older-version") } == true)
        #expect(second.historyQueries.last?.contains { $0.0 == "revision" } == false)
        #expect(second.polled.historyRevision == "rev-C")
        #expect(second.polled.events.map(\.type) == [.renewed], "\(second.polled.events)")
        _ = t0
    }
}

struct CLIFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
