import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// The change feed's storage against real PostgreSQL: the cursor, the commit (idempotent, never
/// overwriting newer state), registration, the inbox, and planning by the feed.
@Suite("ChurnStore change feed")
struct FeedStoreTests {
    static let t0 = RetentionLoopStoreTests.t0
    static let day = RetentionLoopStoreTests.day

    static func record(_ n: Int, _ otid: String?, _ outcome: NotificationOutcome, source: NotificationSource = .history) -> NotificationRecord {
        NotificationRecord(uuid: outcome == .quarantined ? nil : UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", n)),
                           type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", signedDate: outcome == .quarantined ? nil : t0,
                           originalTransactionId: otid, environment: .production, source: source, outcome: outcome)
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int {
        try db.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("the cursor round-trips: a page in progress keeps its window and token, the last page clears them and moves synced_until")
    func cursorRoundTrip() async throws {
        try await FreshDatabase.with { fresh in
            _ = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            #expect(try await store.feedStateRead(environment: .production) == FeedState())
            let start: Int64 = 1_790_000_000_123, end: Int64 = 1_790_086_400_456
            let page = FeedCursor(syncedUntil: nil, inProgress: .init(start: start, end: end, paginationToken: "tok"))
            try await store.feedCursorWrite(environment: .production, cursor: page, records: 20, finishedAt: nil)
            var state = try await store.feedStateRead(environment: .production)
            #expect(state.cursor == page && state.recordsTotal == 20 && state.lastSyncAt == nil)
            try await store.feedCursorWrite(environment: .production, cursor: FeedCursor(syncedUntil: end), records: 5, finishedAt: Self.t0)
            state = try await store.feedStateRead(environment: .production)
            #expect(state.cursor == FeedCursor(syncedUntil: end))
            #expect(state.recordsTotal == 25 && state.lastSyncRecords == 25 && state.lastSyncAt == Self.t0)
            #expect(try await store.feedStateRead(environment: .sandbox) == FeedState())
        }
    }

    @Test("a feed commit registers unknown subscriptions, applies observations like a poll without counting as one, and written twice adds nothing")
    func commitIsIdempotent() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            var batch = FeedBatch()
            batch.register = [("1", .production, nil)]
            batch.writes = [PollStatementsTests.leaving("1")]
            batch.records = [Self.record(1, "1", .applied), Self.record(2, nil, .quarantined)]
            batch.quarantine = [(nil, QuarantinedPayload(endpoint: "notification", reason: "untrusted chain", payload: "x.y.z"))]
            let first = try await store.feedCommit(runId: nil, asOf: Self.t0, detectedAt: Self.t0, batch)
            #expect(first.registered == 1 && first.applied == 1 && first.events == 1 && first.recorded == 2 && first.quarantined == 1)
            let second = try await store.feedCommit(runId: nil, asOf: Self.t0, detectedAt: Self.t0, batch)
            #expect(second.registered == 0 && second.events == 0 && second.enqueued == 0)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events WHERE run_id IS NULL") == 1)
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE notification_uuid IS NOT NULL") == 1)
            let row = try db.query("SELECT auto_renew, last_polled_at, last_success_at FROM churnwatch.subscriptions")[0]
            #expect(try row.decode(Bool?.self, "auto_renew") == false)
            #expect(try row.decode(Date?.self, "last_polled_at") == nil, "an observation from the feed is not a poll")
            #expect(try row.decode(Date?.self, "last_success_at") == Self.t0)
            #expect(try await store.notificationsKnown([try #require(Self.record(1, "1", .applied).uuid), UUID()]).uuids.count == 1)
            #expect(try await store.notificationsSeen(environment: .production))
            #expect(try await store.notificationsSeen(environment: .sandbox) == false, "each environment's feed on its own")
            let loaded = try await store.feedSubscriptions(["1", "absent"])
            #expect(loaded.items.keys.sorted() == ["1"] && loaded.neverPolled == ["1"])
        }
    }

    @Test("the inbox: pending rows oldest first, their payloads read by id; a commit marks its rows with their outcome")
    func inbox() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            for p in ["a", "b", "c"] { try db.execute("INSERT INTO churnwatch.notification_inbox (signed_payload) VALUES (\(p))") }
            let pending = try await store.notificationInboxPending(limit: 2)
            let payloads = try await store.notificationInboxPayloads(pending.map(\.id) + [999_999])
            #expect(pending.map { payloads[$0.id] } == ["a", "b"])
            #expect(payloads.count == 2)
            #expect(pending.allSatisfy { $0.notificationUUID == nil })
            var batch = FeedBatch()
            batch.inbox = [(pending[0].id, .duplicate), (pending[1].id, .quarantined)]
            try await store.feedCommit(runId: nil, asOf: Self.t0, detectedAt: Self.t0, batch)
            let left = try await store.notificationInboxPending(limit: 10)
            #expect(try await store.notificationInboxPayloads(left.map(\.id)).values.sorted() == ["c"])
            #expect(try await store.notificationInboxPending(limit: 10, after: left[0].id).isEmpty)
            let outcomes = try db.query("SELECT outcome FROM churnwatch.notification_inbox WHERE processed_at IS NOT NULL ORDER BY id")
                .map { try $0.decode(String.self, at: 0) }
            #expect(outcomes == ["duplicate", "quarantined"])
        }
    }

    @Test("planning by the feed: an ended period nobody notified and billing trouble without news for 12 h (every night in its first 15 days and around its 60th, every 3 days between) are due; a subscription the feed keeps current is not; an environment whose feed is not live is planned by the windows")
    func feedDueRules() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let asOf = Self.t0, old = Self.t0 - 20 * Self.day, recentNews = Self.t0 - 6 * 3600, lastNight = Self.t0 - Self.day
            let rows: [(String, String, Date, Date, String?)] = [
                ("ended-unnotified", "active", Self.t0 - 2 * Self.day, recentNews, nil),   // due: period_end_unnotified
                ("ends-soon", "active", Self.t0 + Self.day, recentNews, nil),              // a window's, not the feed's
                ("retry-quiet", "billing_retry", Self.t0 - 5 * Self.day, old, nil),       // due: billing_no_news
                ("retry-last-night", "billing_retry", Self.t0 - 5 * Self.day, lastNight, "Production"), // due: every night
                ("retry-news", "billing_retry", Self.t0 - 5 * Self.day, recentNews, nil), // the feed spoke lately
                ("retry-old", "billing_retry", Self.t0 - 20 * Self.day, lastNight, nil),  // past its first 15 days: every 3 days
                ("retry-ending", "billing_retry", Self.t0 - 57 * Self.day, lastNight, nil), // its last days (60 after): every night
                ("sandbox-ends-soon", "active", Self.t0 + Self.day, recentNews, "Sandbox"), // the windows' while Sandbox's feed is not live
            ]
            for (id, state, expires, signed, environment) in rows {
                try db.execute("""
                    INSERT INTO churnwatch.subscriptions (original_transaction_id, state, expires_at, period_start, signed_date,
                                                          last_success_at, last_polled_at, last_outcome, auto_renew, product_id,
                                                          auto_renew_product_id, environment)
                    VALUES (\(id), \(state), \(expires), \(expires - 30 * Self.day), \(signed), \(old), \(old), 'ok', true, 'p', 'p',
                            \(environment))
                    """)
            }
            var w = PlanWindows()
            w.feedEnvironments = [.production, .sandbox]
            let byFeed = try await store.planCounts(asOf: asOf, windows: w)
            #expect(byFeed.byReason == [.periodEndUnnotified: 1, .billingNoNews: 3])
            w.feedEnvironments = [.production]
            let mixed = try await store.planCounts(asOf: asOf, windows: w)
            #expect(mixed.byReason == [.periodEndUnnotified: 1, .billingNoNews: 3, .periodEnd: 1], "\(mixed.byReason)")
            let byWindows = try await store.planCounts(asOf: asOf, windows: PlanWindows())
            #expect(byWindows.byReason[.periodEndUnnotified] == nil && byWindows.total == 8)
        }
    }
}
