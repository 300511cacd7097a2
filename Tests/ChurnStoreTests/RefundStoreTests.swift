import AppStoreModels
import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// Refund requests against real PostgreSQL: recorded once from the feed, marked by Apple's
/// decision, claimed with a lease (a second sync skips what the first holds), expired at the
/// deadline, recorded only by the attempt that holds them, and the customer's consent found by
/// original transaction id or app account token.
@Suite("ChurnStore refund requests")
struct RefundStoreTests {
    static let t0 = RetentionLoopStoreTests.t0
    static let hour: TimeInterval = 3600

    static func notice(_ n: Int, _ otid: String, at: Date = t0) -> RefundRequestNotice {
        RefundRequestNotice(notificationUUID: UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n))!,
                            originalTransactionId: otid, transactionId: "tx\(otid)", environment: .production, reason: "OTHER",
                            requestedAt: at, periodStart: at - 10 * 86_400, periodEnd: at + 20 * 86_400)
    }

    static func commit(_ store: ChurnStore, _ notices: [RefundNotice], at: Date) async throws {
        var batch = FeedBatch()
        batch.refunds = notices
        try await store.feedCommit(runId: nil, asOf: at, detectedAt: at, batch)
    }

    static func state(_ db: PostgresConnection, _ otid: String) throws -> (String, String?, String?) {
        let row = try db.query("SELECT state, policy_branch, decision FROM churnwatch.refund_requests WHERE original_transaction_id = \(otid)")[0]
        return (try row.decode(String.self, "state"), try row.decode(String?.self, "policy_branch"), try row.decode(String?.self, "decision"))
    }

    @Test("a request read twice is kept once; one read after its deadline is not sent (expired) at once; a decision marks the latest undecided request before it")
    func recordAndDecide() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await Self.commit(store, [.request(Self.notice(1, "1")), .request(Self.notice(2, "2", at: Self.t0 - 13 * Self.hour))], at: Self.t0)
            try await Self.commit(store, [.request(Self.notice(1, "1"))], at: Self.t0 + Self.hour)
            #expect(try FeedStoreTests.count(db, "SELECT count(*) FROM churnwatch.refund_requests") == 2)
            #expect(try Self.state(db, "1") == ("pending", nil, nil))
            #expect(try Self.state(db, "2") == ("not_sent", "expired", nil))
            // A decision signed before the request changes nothing; one after it marks it, the latest wins.
            try await Self.commit(store, [.decision(transactionId: "tx1", originalTransactionId: "1", decision: .refunded, at: Self.t0 - 1)], at: Self.t0)
            #expect(try Self.state(db, "1").2 == nil)
            try await Self.commit(store, [.decision(transactionId: "tx1", originalTransactionId: "1", decision: .declined, at: Self.t0 + 20 * Self.hour)],
                                  at: Self.t0 + 20 * Self.hour)
            #expect(try Self.state(db, "1").2 == "declined")
            // The customer asks again about the same transaction; Apple's second decision is the
            // second request's, and the first keeps its own.
            var again = Self.notice(3, "1", at: Self.t0 + 3 * 86_400)
            again.transactionId = "tx1"
            try await Self.commit(store, [.request(again)], at: again.requestedAt)
            try await Self.commit(store, [.decision(transactionId: "tx1", originalTransactionId: "1", decision: .refunded, at: again.requestedAt + 86_400)],
                                  at: again.requestedAt + 86_400)
            let decisions = try db.query("""
                SELECT decision FROM churnwatch.refund_requests WHERE transaction_id = 'tx1' ORDER BY requested_at
                """).map { try $0.decode(String?.self, at: 0) }
            #expect(decisions == ["declined", "refunded"])
        }
    }

    @Test("claims take each open request once until its lease runs out; only the attempt holding it records; the deadline expires it")
    func claimLeaseAndRecord() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 2), logger: .store)
            try await Self.commit(store, [.request(Self.notice(1, "1")), .request(Self.notice(2, "2", at: Self.t0 + Self.hour))], at: Self.t0)
            let first = try await store.refundRequestsClaim(now: Self.t0, limit: 1, lease: 300)
            #expect(first.claimed.map(\.originalTransactionId) == ["1"] && first.claimed[0].attempts == 1)
            let second = try await store.refundRequestsClaim(now: Self.t0 + 10, limit: 10, lease: 300)
            #expect(second.claimed.map(\.originalTransactionId) == ["2"])
            // The first sender died: after its lease another sync takes the request over, attempt 2.
            let taken = try await store.refundRequestsClaim(now: Self.t0 + 301, limit: 10, lease: 300)
            #expect(taken.claimed.map(\.originalTransactionId) == ["1"] && taken.claimed[0].attempts == 2)
            let body = try StoredJSON(encoding: ConsumptionRequest(customerConsented: true, sampleContentProvided: false, deliveryStatus: .delivered))
            #expect(try await store.refundRequestRecord(first.claimed[0].notificationUUID, attempt: 1,
                                                        .answered(body: body, branch: .noPreference, sentAt: Self.t0 + 1, status: 202)) == false)
            #expect(try await store.refundRequestRecord(taken.claimed[0].notificationUUID, attempt: 2,
                                                        .answered(body: body, branch: .noPreference, sentAt: Self.t0 + 302, status: 202)))
            #expect(try Self.state(db, "1") == ("answered", "no_preference", nil))
            // A temporary failure puts it back; past its deadline the next claim expires it.
            #expect(try await store.refundRequestRecord(second.claimed[0].notificationUUID, attempt: 1,
                                                        .retry(body: body, branch: .noPreference, error: "HTTP 503")))
            let late = try await store.refundRequestsClaim(now: Self.t0 + 13 * Self.hour + 1, limit: 10, lease: 300)
            #expect(late.expired == 1 && late.claimed.isEmpty)
            #expect(try Self.state(db, "2") == ("not_sent", "expired", nil))
        }
    }

    @Test("a free trial is remembered after prune removed its transaction: the claim still says trial seen (issue 40)")
    func trialOutlivesPrune() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id, environment) VALUES ('1', 'Production'), ('2', 'Production')")
            // Subscription 1 began with a free week 200 days ago; 2 with an introductory month at a price (no trial).
            let began = Self.t0 - 200 * 86_400
            func record(_ otid: String, _ tx: String, start: Date, days: Double, offer: Int?, price: Int64) throws -> TransactionRecord {
                TransactionRecord(facts: TransactionFacts(originalTransactionId: otid, transactionId: tx, productId: "monthly",
                                                          purchaseDate: start, expiresDate: start + days * 86_400, signedDate: start,
                                                          offerType: offer, price: price),
                                  payload: try StoredJSON(encoding: ["transactionId": tx]))
            }
            var columns = TransactionColumns()
            columns.append(try record("1", "1-trial", start: began, days: 7, offer: 1, price: 0))
            columns.append(try record("1", "1-paid", start: Self.t0 - 10 * 86_400, days: 30, offer: nil, price: 9_990))
            columns.append(try record("2", "2-intro", start: began, days: 30, offer: 1, price: 4_990))
            columns.append(try record("2", "2-paid", start: Self.t0 - 10 * 86_400, days: 30, offer: nil, price: 9_990))
            let written = columns
            try await store.pool.withTransaction { db in try ChurnStore.transactionsUpsert(db, written) }
            _ = try await store.database.prune(RetentionPolicy(), asOf: Self.t0, now: Date(), dryRun: false)
            let kept = try db.query("SELECT transaction_id FROM churnwatch.transactions ORDER BY 1").map { try $0.decode(String.self, at: 0) }
            #expect(kept == ["1-paid", "2-paid"], "prune removed the periods that ended over 60 days ago")
            try await Self.commit(store, [.request(Self.notice(1, "1")), .request(Self.notice(2, "2"))], at: Self.t0)
            let claimed = try await store.refundRequestsClaim(now: Self.t0, limit: 10, lease: 300).claimed
            let trial = Dictionary(uniqueKeysWithValues: claimed.map { ($0.originalTransactionId, $0.facts.trialSeen) })
            #expect(trial == ["1": true, "2": false], "an introductory offer at a price is no trial")
        }
    }

    @Test("consent: the row for the original transaction id wins over the one for the app account token; none is nil")
    func consentLookup() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let token = UUID()
            try db.execute("""
                INSERT INTO churnwatch.subscriptions (original_transaction_id, environment, app_account_token)
                VALUES ('1', 'Production', \(token)), ('2', 'Production', \(token)), ('3', 'Production', NULL)
                """)
            try db.execute("INSERT INTO churnwatch.refund_consent (app_account_token, customer_consented, delivery_status) VALUES (\(token), true, 'UNDELIVERED_OTHER')")
            try db.execute("INSERT INTO churnwatch.refund_consent (original_transaction_id, customer_consented) VALUES ('2', false)")
            try await Self.commit(store, ["1", "2", "3"].enumerated().map { .request(Self.notice($0 + 1, $1)) }, at: Self.t0)
            let claimed = try await store.refundRequestsClaim(now: Self.t0, limit: 10, lease: 300).claimed
            let consent = Dictionary(uniqueKeysWithValues: claimed.map { ($0.originalTransactionId, $0.consent) })
            #expect(consent["1"] == RefundConsent(customerConsented: true, deliveryStatus: .undeliveredOther))
            #expect(consent["2"] == RefundConsent(customerConsented: false))
            #expect(consent["3"] == .some(nil))
            #expect(throws: (any Error).self) {
                try db.execute("INSERT INTO churnwatch.refund_consent (app_account_token, original_transaction_id, customer_consented) VALUES (\(token), '9', true)")
            }
        }
    }

    @Test("the summary counts requests by state and branch with Apple's decisions, within the stretch asked")
    func summary() async throws {
        try await FreshDatabase.with { fresh in
            _ = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await Self.commit(store, [.request(Self.notice(1, "1")), .request(Self.notice(2, "2")),
                                          .request(Self.notice(3, "3", at: Self.t0 - 20 * Self.hour))], at: Self.t0)
            let claimed = try await store.refundRequestsClaim(now: Self.t0, limit: 10, lease: 300).claimed
            for c in claimed where c.originalTransactionId == "1" {
                try await store.refundRequestRecord(c.notificationUUID, attempt: c.attempts, .answered(
                    body: .emptyObject, branch: .declineConsumed, sentAt: Self.t0, status: 202))
            }
            for c in claimed where c.originalTransactionId == "2" {
                try await store.refundRequestRecord(c.notificationUUID, attempt: c.attempts, .notSent(.noConsent))
            }
            try await Self.commit(store, [.decision(transactionId: "tx1", originalTransactionId: "1", decision: .declined, at: Self.t0 + 30 * Self.hour),
                                          .decision(transactionId: "tx2", originalTransactionId: "2", decision: .refunded, at: Self.t0 + 30 * Self.hour)],
                                  at: Self.t0 + 30 * Self.hour)
            let s = try await store.refundSummary(since: Self.t0 - 86_400, until: Self.t0 + 86_400)
            #expect(s.requests == 3 && s.answeredInTime == 1 && s.notSent == 2 && s.open == 0 && s.refunded == 1 && s.declined == 1)
            #expect(s.byBranch.map(\.branch) == ["decline_consumed", "expired", "no_consent"])
            #expect(s.byBranch.first { $0.branch == "decline_consumed" }?.declined == 1)
            let later = try await store.refundSummary(since: Self.t0 - Self.hour, until: Self.t0 + 86_400)
            #expect(later.requests == 2)
        }
    }
}
