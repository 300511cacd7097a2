import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// Each statement of the poll-results commit on its own, against real PostgreSQL, with batches
/// built as the poller builds them (``RetentionLoopStoreTests/write(_:previous:current:at:)``).
@Suite("ChurnStore poll-results statements")
struct PollStatementsTests {
    static let app = "com.example.churnwatch"
    static let t0 = RetentionLoopStoreTests.t0
    static let day = RetentionLoopStoreTests.day

    /// Registered subscriptions (no state yet), a nightly run and the ids' run items.
    static func setUp(_ fresh: FreshDatabase, _ ids: [String]) throws -> (PostgresConnection, Int64) {
        let db = try WinbackQueueTests.migrated(fresh)
        let run = try RetentionLoopStoreTests.run(db, at: t0)
        for id in ids {
            try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id) VALUES (\(id))")
            try db.execute("INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status) VALUES (\(run), \(id), 'new', 'claimed')")
        }
        return (db, run)
    }

    /// `otid` turned auto-renew off between yesterday and `at`: an event, a segment, a save_offer entry.
    static func leaving(_ otid: String, at: Date = t0) -> PollWrite {
        RetentionLoopStoreTests.write(otid, previous: RetentionLoopStoreTests.snapshot(otid, autoRenew: true, at: at - day),
                                      current: RetentionLoopStoreTests.snapshot(otid, autoRenew: false, at: at), at: at)
    }

    static func failed(_ otid: String, _ c: ItemFailureClass, _ reason: String) -> PollWrite {
        var w = leaving(otid)
        w.outcome = .failed(c, reason: reason)
        return w
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int {
        try db.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("polled subscriptions: fresh ones get state and bookkeeping and a new state version; rows another writer changed since the decision (newer, or another version) only bookkeeping, and are reported")
    func subscriptionsWritePolled() async throws {
        try await FreshDatabase.with { fresh in
            let (db, _) = try Self.setUp(fresh, ["1", "2", "3"])
            try db.execute("UPDATE churnwatch.subscriptions SET signed_date = \(Self.t0 + Self.day), consecutive_failures = 4 WHERE original_transaction_id = '2'")
            try db.execute("UPDATE churnwatch.subscriptions SET state_version = 7 WHERE original_transaction_id = '3'")
            let b = try PollBatch([Self.leaving("1"), Self.leaving("2"), Self.leaving("3")])
            let result = try ChurnStore.subscriptionsWritePolled(db, b.subscriptions, ids: b.polledIds, environments: b.polledEnvironments,
                                                                 detectedAt: Self.t0)
            #expect(result.written == 3 && result.conflicted == ["2", "3"])
            let rows = try db.query("""
                SELECT original_transaction_id AS id, product_id, auto_renew, last_outcome, consecutive_failures, last_success_at, state_version
                FROM churnwatch.subscriptions ORDER BY 1
                """)
            #expect(try rows[0].decode(String?.self, "product_id") == "pro.monthly" && rows[0].decode(Bool?.self, "auto_renew") == false)
            #expect(try rows.map { try $0.decode(Int64.self, "state_version") } == [1, 0, 7])
            #expect(try rows[1].decode(String?.self, "product_id") == nil, "stored state newer than the answer: not overwritten")
            #expect(try rows[2].decode(String?.self, "product_id") == nil, "decided from another version: not overwritten")
            #expect(try rows.allSatisfy { try $0.decode(String?.self, "last_outcome") == "ok" && $0.decode(Int.self, "consecutive_failures") == 0
                && $0.decode(Date?.self, "last_success_at") == Self.t0 })
            #expect(try ChurnStore.subscriptionsWritePolled(db, SubscriptionColumns(), ids: [], environments: [], detectedAt: Self.t0).written == 0)
        }
    }

    @Test("failed subscriptions keep their state, record the reason and count consecutive failures")
    func subscriptionsWriteFailed() async throws {
        try await FreshDatabase.with { fresh in
            let (db, _) = try Self.setUp(fresh, ["1"])
            try db.execute("UPDATE churnwatch.subscriptions SET consecutive_failures = 2, product_id = 'kept' WHERE original_transaction_id = '1'")
            #expect(try ChurnStore.subscriptionsWriteFailed(db, ids: ["1", "absent"], reasons: ["unavailable: HTTP 503", "x"], detectedAt: Self.t0) == 1)
            let row = try db.query("SELECT product_id, last_outcome, last_error, consecutive_failures, last_polled_at FROM churnwatch.subscriptions")[0]
            #expect(try row.decode(String?.self, "product_id") == "kept")
            #expect(try row.decode(String?.self, "last_outcome") == "failed" && row.decode(String?.self, "last_error") == "unavailable: HTTP 503")
            #expect(try row.decode(Int.self, "consecutive_failures") == 3 && row.decode(Date?.self, "last_polled_at") == Self.t0)
        }
    }

    static func transaction(_ id: String, expires: Date, signed: Date) -> TransactionColumns {
        let f = TransactionFacts(originalTransactionId: "1", transactionId: id, productId: "pro.monthly", purchaseDate: t0 - 10 * day,
                                 expiresDate: expires, signedDate: signed)
        var c = TransactionColumns()
        c.append(TransactionRecord(facts: f, payload: StoredJSON.emptyObject))
        return c
    }

    @Test("transactions: new ones inserted, a newer signed version replaces, an older one does not")
    func transactionsUpsert() async throws {
        try await FreshDatabase.with { fresh in
            let (db, _) = try Self.setUp(fresh, [])
            try ChurnStore.transactionsUpsert(db, Self.transaction("t1", expires: Self.t0, signed: Self.t0))
            try ChurnStore.transactionsUpsert(db, Self.transaction("t1", expires: Self.t0 + Self.day, signed: Self.t0 - Self.day))
            func expires() throws -> Date? { try db.query("SELECT expires_date FROM churnwatch.transactions")[0].decode(Date?.self, at: 0) }
            #expect(try expires() == Self.t0, "an older signed version is ignored")
            try ChurnStore.transactionsUpsert(db, Self.transaction("t1", expires: Self.t0 + 2 * Self.day, signed: Self.t0 + Self.day))
            #expect(try expires() == Self.t0 + 2 * Self.day)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.transactions") == 1)
            try ChurnStore.transactionsUpsert(db, TransactionColumns())
        }
    }

    @Test("events are added once: the same batch again adds nothing")
    func churnEventsInsert() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try Self.setUp(fresh, ["1"])
            let b = try PollBatch([Self.leaving("1")])
            #expect(b.events.types == ["auto_renew_disabled"])
            #expect(try ChurnStore.churnEventsInsert(db, app: Self.app, b.events, runId: run, detectedAt: Self.t0) == 1)
            #expect(try ChurnStore.churnEventsInsert(db, app: Self.app, b.events, runId: run, detectedAt: Self.t0) == 0)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events WHERE run_id = \(run) AND detected_at = \(Self.t0)") == 1)
        }
    }

    @Test("segments are inserted, then replaced by the next poll")
    func segmentsUpsert() async throws {
        try await FreshDatabase.with { fresh in
            let (db, _) = try Self.setUp(fresh, ["1"])
            try ChurnStore.segmentsUpsert(db, app: Self.app, try PollBatch([Self.leaving("1")]).segments, detectedAt: Self.t0)
            func segment() throws -> String { try db.query("SELECT segment FROM churnwatch.subscription_segments")[0].decode(String.self, at: 0) }
            let first = try segment()
            let back = RetentionLoopStoreTests.write("1", previous: RetentionLoopStoreTests.snapshot("1", autoRenew: false, at: Self.t0),
                                                     current: RetentionLoopStoreTests.snapshot("1", autoRenew: true, at: Self.t0 + Self.day),
                                                     at: Self.t0 + Self.day)
            try ChurnStore.segmentsUpsert(db, app: Self.app, try PollBatch([back]).segments, detectedAt: Self.t0 + Self.day)
            #expect(try segment() != first)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.subscription_segments WHERE last_polled_at = \(Self.t0 + Self.day)") == 1)
        }
    }

    @Test("win-back entries: created once per episode; obsoleted only while pending or claimed, with why")
    func winbackInsertAndObsolete() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try Self.setUp(fresh, ["1"])
            let b = try PollBatch([Self.leaving("1")])
            #expect(try ChurnStore.winbackInsert(db, app: Self.app, b.winback, runId: run, openedAt: Date()) == 1)
            #expect(try ChurnStore.winbackInsert(db, app: Self.app, b.winback, runId: run, openedAt: Date()) == 0, "same subscription, campaign and episode")
            var gone = ObsoleteColumns()
            gone.append("1", ObsoleteEpisode(campaign: .saveOffer, episode: b.winback.episodes[0], reason: "auto-renew back on"))
            #expect(try ChurnStore.winbackObsolete(db, gone, runId: run) == 1)
            #expect(try ChurnStore.winbackObsolete(db, gone, runId: run) == 0, "already obsolete")
            let row = try db.query("SELECT status, reason, obsoleted_run_id FROM churnwatch.winback_queue")[0]
            #expect(try row.decode(String.self, "status") == "obsolete" && row.decode(Int64?.self, "obsoleted_run_id") == run)
            #expect(try row.decode(String.self, "reason").hasSuffix(" (obsolete: auto-renew back on)"))
        }
    }

    @Test("quarantined payloads are kept with the run, one row per payload")
    func quarantineInsert() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try Self.setUp(fresh, ["1"])
            var w = Self.failed("1", .verification, "verification: bad signature")
            w.quarantine = [QuarantinedPayload(endpoint: "subscriptionStatuses", reason: "bad signature", payload: "a.b.c"),
                            QuarantinedPayload(endpoint: "transactionHistory", reason: "bad chain", payload: "d.e.f")]
            #expect(try ChurnStore.quarantineInsert(db, app: Self.app, try PollBatch([w]).quarantine, runId: run) == 2)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.quarantine WHERE run_id = \(run) AND original_transaction_id = '1'") == 2)
        }
    }

    @Test("run items finish: polled ones done and ok, failed ones with their class and reason; the schema refuses other classes")
    func runItemsFinish() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try Self.setUp(fresh, ["1", "2", "3"])
            let b = try PollBatch([Self.leaving("1"), Self.failed("2", .rateLimited, "rate limited: until then")])
            try ChurnStore.runItemsFinish(db, b, runId: run)
            let rows = try db.query("""
                SELECT status, outcome, failure_class, finished_at IS NOT NULL AS finished FROM churnwatch.run_items ORDER BY original_transaction_id
                """)
            #expect(try rows.map { try $0.decode(String.self, "status") } == ["done", "failed", "claimed"])
            #expect(try rows.map { try $0.decode(String?.self, "outcome") } == ["ok", "rate limited: until then", nil])
            #expect(try rows.map { try $0.decode(String?.self, "failure_class") } == [nil, "rate_limited", nil])
            #expect(try rows.map { try $0.decode(Bool.self, "finished") } == [true, true, false])
            #expect(throws: PostgresError.self, "not a failure class") {
                try db.execute("UPDATE churnwatch.run_items SET status = 'failed', failure_class = 'rate limited' WHERE original_transaction_id = '3'")
            }
            #expect(throws: PostgresError.self, "a failed item without a class") {
                try db.execute("UPDATE churnwatch.run_items SET status = 'failed' WHERE original_transaction_id = '3'")
            }
            for c in ItemFailureClass.allCases {
                try db.execute("UPDATE churnwatch.run_items SET status = 'failed', failure_class = \(c.rawValue) WHERE original_transaction_id = '3'")
            }
        }
    }
}
