import ChurnModel
import Foundation
import Postgres

/// The closing counts of a run.
public struct RunSummary: Sendable, Equatable {
    public var runId: Int64
    public var due = 0
    public var polled = 0
    public var failed = 0
    public var failedByClass: [ItemFailureClass: Int] = [:]
    public var events = 0
    public var eventsByType: [String: Int] = [:]
    public var enqueued = 0
    public var enqueuedByCampaign: [String: Int] = [:]
    public var obsoleted = 0
    public var expired = 0
    public var quarantined = 0

    /// Failed items by their class's label ("not found", ...), as printed and stored in `counts`.
    public var failedByReason: [String: Int] {
        ItemFailureClass.countedByLabel(failedByClass.map { ($0.key, $0.value) })
    }
}

extension ChurnStore {
    /// Closes a run whose items are all done or failed: gives never-polled subscriptions their
    /// `unknown` segment row, expires win-back entries past their window, writes the day's
    /// segment sizes (`segment_daily`), and records the run's counts. Safe to call again.
    public func runFinish(_ runId: Int64, asOf: Date) async throws -> RunSummary {
        try await pool.withTransaction { db in
            try db.execute("""
                INSERT INTO churnwatch.subscription_segments (bundle_id, original_transaction_id, app_account_token, customer_ref,
                                                              segment, segment_since)
                SELECT s.bundle_id, s.original_transaction_id, s.app_account_token, s.customer_ref, 'unknown', s.registered_at
                FROM churnwatch.subscriptions s
                WHERE s.bundle_id = \(app) AND NOT EXISTS (SELECT 1 FROM churnwatch.subscription_segments g WHERE g.original_transaction_id = s.original_transaction_id)
                """)
            let expired = try db.execute("""
                UPDATE churnwatch.winback_queue SET status = 'expired', updated_at = now()
                WHERE status = 'pending' AND expires_at <= \(asOf) AND bundle_id = \(app)
                """)
            try Self.segmentDailyWrite(db, app: app, day: asOf)

            var summary = RunSummary(runId: runId)
            summary.expired = expired
            let run = try db.query("SELECT due FROM churnwatch.runs WHERE id = \(runId)")
            summary.due = try run.first?.decode(Int.self, "due") ?? 0
            for row in try db.query("""
                SELECT status, failure_class, count(*) AS n FROM churnwatch.run_items
                WHERE run_id = \(runId) GROUP BY status, failure_class
                """) {
                let n = try row.decode(Int.self, "n")
                switch try row.decode(String.self, "status") {
                case "done": summary.polled += n
                case "failed":
                    summary.failed += n
                    summary.failedByClass[try Self.decodeFailureClass(row) ?? .unknown, default: 0] += n
                default: break
                }
            }
            for row in try db.query("SELECT event, count(*) AS n FROM churnwatch.churn_events WHERE run_id = \(runId) GROUP BY event") {
                let n = try row.decode(Int.self, "n")
                summary.eventsByType[try row.decode(String.self, "event")] = n
                summary.events += n
            }
            for row in try db.query("SELECT campaign, count(*) AS n FROM churnwatch.winback_queue WHERE run_id = \(runId) GROUP BY campaign") {
                let n = try row.decode(Int.self, "n")
                summary.enqueuedByCampaign[try row.decode(String.self, "campaign")] = n
                summary.enqueued += n
            }
            summary.obsoleted = try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE obsoleted_run_id = \(runId)")[0].decode(Int.self, at: 0)
            summary.quarantined = try db.query("SELECT count(*) FROM churnwatch.quarantine WHERE run_id = \(runId)")[0].decode(Int.self, at: 0)

            let counts = try PostgresJSON(encoding: RunCountsJSON(summary))
            try db.execute("""
                UPDATE churnwatch.runs SET status = 'done', finished_at = coalesce(finished_at, now()),
                    polled = \(summary.polled), failed = \(summary.failed), events = \(summary.events),
                    enqueued = \(summary.enqueued), obsoleted = \(summary.obsoleted),
                    counts = counts || \(counts)
                WHERE id = \(runId)
                """)
            return summary
        }
    }

    /// The day's segment sizes of `app` by product, replacing any earlier figures for that day.
    static func segmentDailyWrite(_ db: PostgresConnection, app: String, day: Date) throws {
        let dayText = Self.dayString(day)
        try db.execute("DELETE FROM churnwatch.segment_daily WHERE bundle_id = \(app) AND day = \(dayText)::date")
        try db.execute("""
            INSERT INTO churnwatch.segment_daily (bundle_id, day, segment, product_id, subscriptions)
            SELECT \(app), \(dayText)::date, segment, coalesce(product_id, ''), count(*)
            FROM churnwatch.subscription_segments
            WHERE bundle_id = \(app)
            GROUP BY segment, coalesce(product_id, '')
            """)
    }

    /// `2026-11-21` for the UTC day of `date`.
    static func dayString(_ date: Date) -> String {
        date.ISO8601Format(.iso8601.year().month().day())
    }

    /// The `failure_class` column of a run item; nil when it has none.
    static func decodeFailureClass(_ row: PostgresRow) throws -> ItemFailureClass? {
        guard let raw = try row.decode(String?.self, "failure_class") else { return nil }
        // The schema admits only known values (migration 0010); a newer schema's value counts as unknown.
        return ItemFailureClass(rawValue: raw) ?? .unknown
    }
}

private struct RunCountsJSON: Encodable {
    var failed_by_reason: [String: Int]
    var events_by_type: [String: Int]
    var enqueued_by_campaign: [String: Int]
    var winback_expired: Int
    var quarantined: Int

    init(_ s: RunSummary) {
        failed_by_reason = s.failedByReason
        events_by_type = s.eventsByType
        enqueued_by_campaign = s.enqueuedByCampaign
        winback_expired = s.expired
        quarantined = s.quarantined
    }
}
