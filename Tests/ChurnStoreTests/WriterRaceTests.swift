import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// Two writers of one subscription at the same time (issue 24: a run's poll beside a
/// `notifications sync`): each decided its events from the state it read; whichever commits
/// second finds another state version and writes none of its observations.
@Suite("ChurnStore: writers of one subscription at the same time")
struct WriterRaceTests {
    static let t0 = RetentionLoopStoreTests.t0
    static let day = RetentionLoopStoreTests.day

    /// `otid` turned auto-renew off: seen at `at`, decided from yesterday's state (version 0).
    static func turnedOff(_ otid: String, seenAt at: Date) -> PollWrite {
        RetentionLoopStoreTests.write(otid, previous: RetentionLoopStoreTests.snapshot(otid, autoRenew: true, at: t0 - day),
                                      current: RetentionLoopStoreTests.snapshot(otid, autoRenew: false, at: at), at: at)
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int {
        try db.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("a poll decided before the feed applied the same change writes no second event; its item goes back to pending and the next poll sees the feed's state")
    func pollAfterTheFeedWroteTheSameChange() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try PollStatementsTests.setUp(fresh, ["1", "2"])
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            // The run claimed 1 and 2 (state version 0) and polls; meanwhile the sync applies the
            // notification of 1's change (signed an hour before the poll's answer).
            var batch = FeedBatch()
            batch.writes = [Self.turnedOff("1", seenAt: Self.t0 - 3600)]
            let feed = try await store.feedCommit(runId: nil, asOf: Self.t0, detectedAt: Self.t0, batch)
            #expect(feed.events == 1 && feed.conflicted.isEmpty)
            let poll = try await store.pollResultsCommit(runId: run, asOf: Self.t0, detectedAt: Self.t0,
                                                         [Self.turnedOff("1", seenAt: Self.t0), Self.turnedOff("2", seenAt: Self.t0)])
            #expect(poll.conflicted == ["1"] && poll.polled == 1 && poll.events == 1)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events WHERE original_transaction_id = '1'") == 1,
                    "the change is logged once")
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE original_transaction_id = '1'") == 1)
            let items = try db.query("SELECT original_transaction_id, status FROM churnwatch.run_items ORDER BY 1")
                .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1))" }
            #expect(items == ["1 pending", "2 done"])
            // Claimed again, the item carries the feed's state and version: its poll is no news.
            let again = try #require(try await store.runItemsClaim(runId: run, worker: "w", limit: 10, lease: 60).first)
            #expect(again.stateVersion == 1 && again.snapshot?.autoRenew == false)
        }
    }

    @Test("a receipt's placeholder re-keyed to an id registered already, with a state version of its own, is written (no conflict: it would be polled again forever, its placeholder gone)")
    func aLearnedIdIsWrittenWhateverItsVersion() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try PollStatementsTests.setUp(fresh, ["receipt:abc"])
            try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id, state_version) VALUES ('77', 5)")
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            var w = Self.turnedOff("77", seenAt: Self.t0)
            w.item.originalTransactionId = "receipt:abc"
            w.learnedOriginalTransactionId = "77"
            let counts = try await store.pollResultsCommit(runId: run, asOf: Self.t0, detectedAt: Self.t0, [w])
            #expect(counts.conflicted.isEmpty && counts.polled == 1)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.subscriptions WHERE original_transaction_id = '77' AND state_version = 6") == 1)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.run_items WHERE status = 'done'") == 1)
        }
    }

    @Test("a notification decided before a poll wrote the subscription is decided again by the sync (FeedCounts.conflicted), not written")
    func feedAfterAPollWroteTheSubscription() async throws {
        try await FreshDatabase.with { fresh in
            let (db, run) = try PollStatementsTests.setUp(fresh, ["1"])
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await store.pollResultsCommit(runId: run, asOf: Self.t0, detectedAt: Self.t0, [Self.turnedOff("1", seenAt: Self.t0 - 60)])
            var batch = FeedBatch()
            batch.writes = [Self.turnedOff("1", seenAt: Self.t0)]
            batch.records = [FeedStoreTests.record(1, "1", .applied)]
            let feed = try await store.feedCommit(runId: nil, asOf: Self.t0, detectedAt: Self.t0, batch)
            #expect(feed.conflicted == ["1"] && feed.events == 0 && feed.recorded == 0,
                    "nothing of the subscription's, not even the notification's row: it is decided again")
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events") == 1)
        }
    }
}
