import AppStoreModels
import ChurnModel
import Foundation
import Postgres

/// What a feed commit wrote.
public struct FeedCounts: Sendable, Equatable {
    public var applied = 0
    public var registered = 0
    public var events = 0
    public var enqueued = 0
    public var obsoleted = 0
    public var quarantined = 0
    /// Rows of `churnwatch.notifications` written (a notification recorded meanwhile by another
    /// process is not written twice).
    public var recorded = 0
    /// Subscriptions another writer changed since the batch was decided (a run's poll beside
    /// this sync): nothing about them was written; the caller decides their notifications again.
    public var conflicted: Set<String> = []
    /// Refund requests first read after their deadline, recorded as not sent (`expired`).
    public var lateRefundRequests = 0
    /// Late notifications placed by their `signedDate` (``FeedBatch/late``), the events they
    /// logged (in `events` too), the events they superseded, and those that could not be placed.
    public var placedLate = 0
    public var superseded = 0
    public var stale = 0

    public init() {}
}

extension ChurnStore {
    /// Commits a batch of the change feed in one transaction: the subscriptions it registers,
    /// the observations (through the same statements as a poll's batch: snapshots, transactions,
    /// events, segments, win-back), the notifications' rows, quarantined payloads, refund
    /// requests and decisions, and the inbox rows it handled. A batch holds at most one observation per subscription. Idempotent:
    /// written twice, it adds nothing the second time (events and win-back entries have their
    /// unique keys, a subscription is never overwritten by an older observation, notifications
    /// are keyed by their UUID).
    @discardableResult
    public func feedCommit(runId: Int64?, asOf: Date, detectedAt: Date, _ decided: FeedBatch) async throws -> FeedCounts {
        guard !decided.isEmpty else { return FeedCounts() }
        let all = try PollBatch(decided.writes)
        let quarantine = decided.quarantine.reduce(into: QuarantineColumns()) { $0.append($1.originalTransactionId, $1.payload) }
        return try await pool.withTransaction { db in
            var counts = FeedCounts()
            counts.registered = try Self.subscriptionsRegister(db, app: app, decided.register)
            let (written, conflicted) = try Self.subscriptionsWritePolled(
                db, all.subscriptions, ids: all.polledIds, environments: all.polledEnvironments, detectedAt: detectedAt, polled: false,
                established: decided.established)
            counts.applied = written - conflicted.count
            counts.conflicted = conflicted
            // The rare conflict: the batch again without those subscriptions.
            let batch = decided.without(conflicted)
            let b = conflicted.isEmpty ? all : try PollBatch(batch.writes)
            (counts.events, counts.obsoleted, counts.enqueued) = try Self.observationsWrite(db, app: app, b, runId: runId, asOf: asOf,
                                                                                           detectedAt: detectedAt)
            let late = try Self.lateObservationsPlace(db, app: app, batch.late, runId: runId, detectedAt: detectedAt)
            counts.events += late.events
            counts.superseded = late.superseded
            counts.stale = late.unplaced.count
            counts.placedLate = batch.late.count - late.unplaced.count
            counts.quarantined = try Self.quarantineInsert(db, app: app, quarantine, runId: runId)
            let (records, inbox) = Self.unplacedStale(batch, late.unplaced)
            counts.recorded = try Self.notificationsInsert(db, app: app, records)
            counts.lateRefundRequests = try Self.refundNoticesWrite(db, app: app, batch.refunds, receivedAt: detectedAt)
            try Self.notificationInboxFinish(db, inbox)
            return counts
        }
    }

    /// The batch's notification and inbox rows, those of the late notifications that could not
    /// be placed saying `stale`.
    static func unplacedStale(_ batch: FeedBatch, _ unplaced: Set<UUID>)
        -> (records: [NotificationRecord], inbox: [(id: Int64, outcome: NotificationOutcome)]) {
        guard !unplaced.isEmpty else { return (batch.records, batch.inbox) }
        let inboxIds = Set(batch.late.filter { $0.uuid.map(unplaced.contains) ?? false }.compactMap(\.inboxId))
        let records = batch.records.map { r -> NotificationRecord in
            guard let uuid = r.uuid, unplaced.contains(uuid) else { return r }
            var stale = r
            stale.outcome = .stale
            stale.reason = "signed before the stored state, and before every observation kept of it"
            return stale
        }
        return (records, batch.inbox.map { inboxIds.contains($0.id) ? ($0.id, .stale) : $0 })
    }

    /// Subscriptions first heard of through a notification, registered as the app's backend
    /// would (an existing row is left alone).
    static func subscriptionsRegister(_ db: PostgresConnection, app: String,
                                      _ rows: [(id: String, environment: AppStoreEnvironment, appAccountToken: UUID?)]) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        return try db.execute("""
            INSERT INTO churnwatch.subscriptions (bundle_id, original_transaction_id, environment, app_account_token)
            SELECT \(app), id, environment, token
            FROM unnest(\(rows.map(\.id))::text[], \(rows.map(\.environment.rawValue))::text[], \(rows.map(\.appAccountToken))::uuid[])
                 AS u(id, environment, token)
            ON CONFLICT (original_transaction_id) DO NOTHING
            """)
    }

    /// The notifications' rows; one already recorded (by its UUID) is skipped. Returns how many were written.
    static func notificationsInsert(_ db: PostgresConnection, app: String, _ records: [NotificationRecord]) throws -> Int {
        guard !records.isEmpty else { return 0 }
        return try db.execute("""
            INSERT INTO churnwatch.notifications (bundle_id, notification_uuid, notification_type, subtype, signed_date,
                                                  original_transaction_id, environment, source, outcome, reason, payload_sha256)
            SELECT \(app), uuid, type, subtype, signed_date, otid, environment, source, outcome, reason, digest
            FROM unnest(\(records.map(\.uuid))::uuid[], \(records.map(\.type))::text[], \(records.map(\.subtype))::text[],
                        \(records.map(\.signedDate))::timestamptz[], \(records.map(\.originalTransactionId))::text[],
                        \(records.map(\.environment?.rawValue))::text[], \(records.map(\.source.rawValue))::text[],
                        \(records.map(\.outcome.rawValue))::text[], \(records.map(\.reason))::text[],
                        \(records.map(\.payloadDigest))::text[])
                 AS u(uuid, type, subtype, signed_date, otid, environment, source, outcome, reason, digest)
            ON CONFLICT DO NOTHING
            """)
    }

    static func notificationInboxFinish(_ db: PostgresConnection, _ rows: [(id: Int64, outcome: NotificationOutcome)]) throws {
        guard !rows.isEmpty else { return }
        try db.execute("""
            UPDATE churnwatch.notification_inbox AS i SET processed_at = now(), outcome = u.outcome
            FROM unnest(\(rows.map(\.id))::bigint[], \(rows.map(\.outcome.rawValue))::text[]) AS u(id, outcome)
            WHERE i.id = u.id AND i.processed_at IS NULL
            """)
    }
}
