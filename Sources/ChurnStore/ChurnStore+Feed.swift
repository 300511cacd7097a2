import AppStoreModels
import ChurnModel
import Foundation
import Postgres

/// The change feed's reads (docs/contracts.md "Change feed").
extension ChurnStore {
    /// Where the sync of `environment` stands (an empty state before the first sync).
    public func feedStateRead(environment: AppStoreEnvironment) async throws -> FeedState {
        try await pool.withConnection { db in
            let rows = try db.query("""
                SELECT synced_until, window_start, window_end, pagination_token, last_sync_at, last_sync_records, records_total
                FROM churnwatch.notification_feed WHERE bundle_id = \(app) AND environment = \(environment.rawValue)
                """)
            guard let row = rows.first else { return FeedState() }
            var state = FeedState()
            state.cursor.syncedUntil = try row.decode(Date?.self, "synced_until").map { EpochMilliseconds($0).rawValue }
            if let start = try row.decode(Date?.self, "window_start"), let end = try row.decode(Date?.self, "window_end"),
               let token = try row.decode(String?.self, "pagination_token") {
                state.cursor.inProgress = .init(start: EpochMilliseconds(start).rawValue, end: EpochMilliseconds(end).rawValue, paginationToken: token)
            }
            state.lastSyncAt = try row.decode(Date?.self, "last_sync_at")
            state.lastSyncRecords = try row.decode(Int.self, "last_sync_records")
            state.recordsTotal = try row.decode(Int64.self, "records_total")
            return state
        }
    }

    /// Stores the cursor after a page (`finishedAt` nil) or after the last page of a sync.
    /// `records`: history records read by this page.
    public func feedCursorWrite(environment: AppStoreEnvironment, cursor: FeedCursor, records: Int, finishedAt: Date?) async throws {
        let until = cursor.syncedUntil.map { EpochMilliseconds($0).date }
        let start = cursor.inProgress.map { EpochMilliseconds($0.start).date }
        let end = cursor.inProgress.map { EpochMilliseconds($0.end).date }
        let token = cursor.inProgress?.paginationToken
        try await pool.withConnection { db in
            try db.execute("""
                INSERT INTO churnwatch.notification_feed AS f (bundle_id, environment, synced_until, window_start, window_end,
                                                               pagination_token, last_sync_at, last_sync_records, records_total)
                VALUES (\(app), \(environment.rawValue), \(until), \(start), \(end), \(token), \(finishedAt), \(records), \(records))
                ON CONFLICT (bundle_id, environment) DO UPDATE SET
                    synced_until = excluded.synced_until, window_start = excluded.window_start,
                    window_end = excluded.window_end, pagination_token = excluded.pagination_token,
                    last_sync_at = coalesce(excluded.last_sync_at, f.last_sync_at),
                    last_sync_records = CASE WHEN f.pagination_token IS NULL THEN \(records)
                                             ELSE f.last_sync_records + \(records) END,
                    records_total = f.records_total + \(records)
                """)
        }
    }

    /// Of these notification UUIDs, the ones already recorded.
    public func notificationsKnown(_ uuids: [UUID], rejectedDigests: [String] = []) async throws -> (uuids: Set<UUID>, digests: Set<String>) {
        guard !uuids.isEmpty || !rejectedDigests.isEmpty else { return ([], []) }
        return try await pool.withConnection { db in
            let known = Set(try db.query("""
                SELECT notification_uuid FROM churnwatch.notifications WHERE notification_uuid = ANY(\(uuids)::uuid[])
                """).map { try $0.decode(UUID.self, "notification_uuid") })
            guard !rejectedDigests.isEmpty else { return (known, []) }
            let digests = Set(try db.query("""
                SELECT payload_sha256 FROM churnwatch.notifications WHERE payload_sha256 = ANY(\(rejectedDigests)::text[])
                """).map { try $0.decode(String.self, "payload_sha256") })
            return (known, digests)
        }
    }

    /// The stored state of these subscriptions, as a claim would return it (reason `feed`;
    /// unknown ids are absent), and which of them were never polled (their state, if any, came
    /// from the feed alone).
    public func feedSubscriptions(_ ids: [String]) async throws -> (items: [String: ClaimedItem], neverPolled: Set<String>) {
        guard !ids.isEmpty else { return ([:], []) }
        let decoder = JSONDecoder()
        return try await pool.withConnection { db in
            let rows = try db.query("""
                SELECT \(Self.feedItemColumns)
                FROM churnwatch.subscriptions s
                LEFT JOIN churnwatch.subscription_segments g USING (original_transaction_id)
                WHERE s.original_transaction_id = ANY(\(ids)::text[])
                """)
            var items: [String: ClaimedItem] = [:]
            var neverPolled = Set<String>()
            for row in rows {
                let item = try Self.decodeClaimed(row, decoder)
                items[item.originalTransactionId] = item
                if try row.decode(Bool.self, "never_polled") { neverPolled.insert(item.originalTransactionId) }
            }
            return (items, neverPolled)
        }
    }

    /// What ``decodeClaimed(_:_:)`` reads of a subscription (`s`) and its segment (`g`) for the feed.
    static let feedItemColumns: PostgresQuery = """
        s.original_transaction_id, 'feed' AS reason, 0 AS attempts, s.environment, s.receipt_data,
        s.app_account_token, s.customer_ref, s.snapshot, s.latest_transaction_id, s.history_revision,
        s.established_at, s.state_version, g.segment, g.segment_since,
        -- No state from a successful poll: never polled, only failed polls (no state at all), or
        -- a state the first sync established that no poll has replaced (a poll clears it).
        (s.last_polled_at IS NULL OR s.snapshot IS NULL OR s.established_at IS NOT NULL) AS never_polled,
        (SELECT coalesce(array_agg(w.campaign || ' ' || w.episode), '{}') FROM churnwatch.winback_queue w
          WHERE w.original_transaction_id = s.original_transaction_id AND w.status IN ('pending', 'claimed')) AS live
        """

    /// Up to `limit` subscriptions of `environment` whose state a first sync established and no
    /// poll has replaced, in id order after `after` (keyset paging over the whole table).
    public func feedEstablished(environment: AppStoreEnvironment, after: String, limit: Int) async throws -> [ClaimedItem] {
        let decoder = JSONDecoder()
        return try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.feedItemColumns)
                FROM churnwatch.subscriptions s
                LEFT JOIN churnwatch.subscription_segments g USING (original_transaction_id)
                WHERE s.original_transaction_id > \(after) AND s.environment = \(environment.rawValue) AND s.bundle_id = \(app)
                  AND s.established_at IS NOT NULL AND s.last_polled_at IS NULL AND s.snapshot IS NOT NULL
                ORDER BY s.original_transaction_id
                LIMIT \(limit)
                """).map { try Self.decodeClaimed($0, decoder) }
        }
    }

    /// Win-back entries for the subscriptions a first sync established, with their offers and
    /// holdout draws; one already there (same subscription, campaign and episode) stays as it
    /// is. `openedAt`: the sync's moment. Returns how many were created.
    @discardableResult
    public func winbackEnqueue(_ entries: [(entry: WinbackEntry, item: ClaimedItem)], runId: Int64?, openedAt: Date) async throws -> Int {
        guard !entries.isEmpty else { return 0 }
        let columns = entries.reduce(into: WinbackColumns()) { $0.append($1.entry, $1.item) }
        return try await pool.withTransaction { db in
            let created = try Self.winbackInsert(db, app: app, columns, runId: runId, openedAt: openedAt)
            try Self.winbackAssignOffers(db, app: app, columns)
            return created
        }
    }

    /// Up to `limit` of this app's inbox rows not yet processed, oldest first, after row `after`: their ids and
    /// notification UUIDs (the payloads are read by ``notificationInboxPayloads(_:)``, for the rows
    /// that need them).
    public func notificationInboxPending(limit: Int, after: Int64 = 0) async throws -> [(id: Int64, notificationUUID: UUID?)] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT id, notification_uuid FROM churnwatch.notification_inbox
                WHERE processed_at IS NULL AND bundle_id = \(app) AND id > \(after) ORDER BY id LIMIT \(limit)
                """).map { (try $0.decode(Int64.self, "id"), try $0.decode(UUID?.self, "notification_uuid")) }
        }
    }

    /// The payloads of the inbox rows `ids` (a row gone meanwhile is left out).
    public func notificationInboxPayloads(_ ids: [Int64]) async throws -> [Int64: String] {
        guard !ids.isEmpty else { return [:] }
        return try await pool.withConnection { db in
            var out: [Int64: String] = [:]
            for row in try db.query("SELECT id, signed_payload FROM churnwatch.notification_inbox WHERE id = ANY(\(ids)::bigint[])") {
                out[try row.decode(Int64.self, "id")] = try row.decode(String.self, "signed_payload")
            }
            return out
        }
    }

    /// The feed for `status`, `plan` and the metrics file.
    public func feedStatus(environment: AppStoreEnvironment, asOf: Date) async throws -> FeedStatus {
        let state = try await feedStateRead(environment: environment)
        return try await pool.withConnection { db in
            var last24h: [NotificationOutcome: Int] = [:]
            for row in try db.query("""
                SELECT outcome, count(*) AS n FROM churnwatch.notifications
                WHERE received_at > \(asOf.addingTimeInterval(-86_400)) AND bundle_id = \(app) GROUP BY outcome
                """) {
                if let o = NotificationOutcome(rawValue: try row.decode(String.self, "outcome")) { last24h[o] = try row.decode(Int.self, "n") }
            }
            let pending = try db.query("""
                SELECT count(*) AS n FROM churnwatch.notification_inbox WHERE processed_at IS NULL AND bundle_id = \(app)
                """)[0]
                .decode(Int.self, "n")
            return FeedStatus(state: state, last24h: last24h, inboxPending: pending,
                              hasNotifications: try Self.notificationsSeen(db, app: app, environment: environment))
        }
    }

    /// True once any verified notification about a subscription of `environment` was recorded:
    /// from then on planning trusts that environment's feed and polls only where it is silent
    /// (``PlanWindows/feedEnvironments``).
    public func notificationsSeen(environment: AppStoreEnvironment) async throws -> Bool {
        try await pool.withConnection { db in try Self.notificationsSeen(db, app: app, environment: environment) }
    }

    static func notificationsSeen(_ db: PostgresConnection, app: String, environment: AppStoreEnvironment) throws -> Bool {
        try db.query("""
            SELECT EXISTS (SELECT 1 FROM churnwatch.notifications
                           WHERE environment = \(environment.rawValue) AND outcome IN ('applied', 'stale')
                             AND bundle_id = \(app)) AS seen
            """)[0].decode(Bool.self, "seen")
    }
}

extension ClaimedItem {
    /// A subscription first heard of through a notification, before its row exists: no state,
    /// so its first observation establishes state without events (as a first poll does).
    public static func unregistered(_ id: String, environment: AppStoreEnvironment?, appAccountToken: UUID?) -> ClaimedItem {
        ClaimedItem(originalTransactionId: id, reason: "feed", attempts: 0, environment: environment, receiptData: nil,
                    appAccountToken: appAccountToken, customerRef: nil, snapshot: nil, segment: nil,
                    latestTransactionId: nil, historyRevision: nil, liveEpisodes: [])
    }
}
