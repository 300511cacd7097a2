import Foundation
import Postgres

/// The figures `churnwatch run --metrics-file` publishes that come from the database: the
/// run's items and events, segment sizes and the live win-back queue.
public struct RunMetricsFigures: Sendable, Equatable {
    /// The run's items by status (every worker's, not only this process's); nil without a run.
    public var items: RunProgress?
    /// The run's churn events by `event`; nil without a run.
    public var eventsByType: [String: Int]?
    /// Subscriptions by `segment`, now (`subscription_segments`); segments with none are absent.
    public var segments: [String: Int] = [:]
    /// Win-back entries by campaign, then status; only `pending` and `claimed` (the live ones).
    public var winbackDepth: [String: [String: Int]] = [:]

    public init() {}
}

extension ChurnStore {
    /// The database figures for run `runId` (nil: segments and win-back queue only), read in
    /// one snapshot. Counts `subscription_segments` (one index scan): once per run, not per batch.
    public func metricsFigures(runId: Int64?) async throws -> RunMetricsFigures {
        try await pool.withTransaction { db in
            try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            var figures = RunMetricsFigures()
            if let runId {
                let items = try Self.runProgress(db, runId: runId)
                var events: [String: Int] = [:]
                for row in try db.query("SELECT event, count(*) AS n FROM churnwatch.churn_events WHERE run_id = \(runId) GROUP BY event") {
                    events[try row.decode(String.self, "event")] = try row.decode(Int.self, "n")
                }
                figures.items = items
                figures.eventsByType = events
            }
            for row in try db.query("SELECT segment, count(*) AS n FROM churnwatch.subscription_segments WHERE bundle_id = \(app) GROUP BY segment") {
                figures.segments[try row.decode(String.self, "segment")] = try row.decode(Int.self, "n")
            }
            for row in try db.query("""
                SELECT campaign, status, count(*) AS n FROM churnwatch.winback_queue
                WHERE status IN ('pending', 'claimed') AND bundle_id = \(app) GROUP BY campaign, status
                """) {
                figures.winbackDepth[try row.decode(String.self, "campaign"), default: [:]][try row.decode(String.self, "status")] =
                    try row.decode(Int.self, "n")
            }
            return figures
        }
    }
}
