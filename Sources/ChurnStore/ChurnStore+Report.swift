import ChurnModel
import Foundation
import Postgres

extension ChurnStore {
    /// The figures of `churnwatch report`, aggregated in SQL and read in one snapshot
    /// (REPEATABLE READ, read only). Time series cover the `days` days ending with the UTC day
    /// of `asOf`; events, moves and runs after `asOf` are left out. Billing trouble now, the
    /// win-back queue and revenue at risk are the current state whatever `asOf` says.
    /// A database without the churnwatch schema gives `migrated == false`, not an error.
    /// Experiments (migration 0027) are read after that snapshot, by the experiments' own reads.
    public func reportRows(asOf: Date, days: Int) async throws -> ReportRows {
        var (data, experiments) = try await pool.withTransaction { db -> (ReportRows, Bool) in
            try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            // Each query is a scan and a small aggregate: compiling it (JIT) took longer than
            // running it (0.8 s of 2.7 s for the billing curve over a million subscriptions).
            try db.execute(Self.withoutJIT)
            var data = ReportRows(asOf: asOf, days: days)
            data.app = app
            let tables = try db.query("""
                SELECT to_regclass('churnwatch.subscriptions') IS NOT NULL, to_regclass('churnwatch.apps') IS NOT NULL,
                       to_regclass('churnwatch.retention_message_requests') IS NOT NULL, to_regclass('churnwatch.experiments') IS NOT NULL
                """)[0]
            guard try tables.decode(Bool.self, at: 0) else {
                data.migrated = false
                return (data, false)
            }
            guard try tables.decode(Bool.self, at: 1) else {
                throw SchemaError(description: "the churnwatch schema is behind this build (no churnwatch.apps): run `churnwatch migrate` first")
            }
            data.subscriptions = try db.query("SELECT count(*) FROM churnwatch.subscriptions WHERE bundle_id = \(app)")[0].decode(Int.self, at: 0)
            try Self.reportSegments(db, &data)
            try Self.reportEvents(db, &data)
            try Self.reportFlows(db, &data)
            try Self.reportBilling(db, &data)
            try Self.reportWinback(db, &data)
            try Self.reportRevenue(db, &data)
            try Self.reportRefunds(db, &data)
            // A database not migrated to the cancel page yet (0022) has none to show.
            if try tables.decode(Bool.self, at: 2) { try Self.reportCancelPage(db, &data) }
            try Self.reportRuns(db, &data)
            if try db.query("SELECT to_regclass('churnwatch.webhook_endpoints') IS NOT NULL")[0].decode(Bool.self, at: 0) {
                try Self.reportWebhooks(db, &data)
            }
            return (data, try tables.decode(Bool.self, at: 3))
        }
        if experiments { data.experiments = try await reportExperiments(asOf: asOf, days: days) }
        return data
    }

    /// The first and last day of the report's window, `YYYY-MM-DD`.
    static func reportWindow(_ data: ReportRows) -> (first: String, last: String) {
        let first = data.asOf.addingTimeInterval(-86_400 * Double(max(data.days, 1) - 1))
        return (dayString(first), dayString(data.asOf))
    }

    static func reportSegments(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        let (first, last) = reportWindow(data)
        data.segmentSizes = try db.query("""
            SELECT to_char(day, 'YYYY-MM-DD') AS day, segment, sum(subscriptions)::bigint AS n
            FROM churnwatch.segment_daily WHERE bundle_id = \(data.app) AND day BETWEEN \(first)::date AND \(last)::date
            GROUP BY 1, 2 ORDER BY 1, 2
            """).map {
            ReportRows.SegmentSize(day: try $0.decode(String.self, "day"), segment: try $0.decode(String.self, "segment"),
                                   subscriptions: try $0.decode(Int.self, "n"))
        }
        guard let today = data.segmentSizes.last?.day else { return }
        data.segmentProducts = try db.query("""
            SELECT segment, product_id, subscriptions FROM churnwatch.segment_daily
            WHERE bundle_id = \(data.app) AND day = \(today)::date ORDER BY subscriptions DESC, segment, product_id
            """).map {
            ReportRows.SegmentProduct(segment: try $0.decode(String.self, "segment"), productId: try $0.decode(String.self, "product_id"),
                                      subscriptions: try $0.decode(Int.self, "subscriptions"))
        }
    }

    /// Events by the UTC day of the night that detected them.
    static func reportEvents(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        let (first, last) = reportWindow(data)
        data.events = try db.query("""
            SELECT to_char(day, 'YYYY-MM-DD') AS day, event, n FROM (
                SELECT (detected_at AT TIME ZONE 'UTC')::date AS day, event, count(*) AS n FROM churnwatch.churn_events
                WHERE detected_at >= \(first)::date AND detected_at < \(last)::date + 1 AND detected_at <= \(data.asOf)
                  AND bundle_id = \(data.app) AND superseded_at IS NULL
                GROUP BY 1, 2) AS g
            ORDER BY 1, 2
            """).map {
            ReportRows.EventCount(day: try $0.decode(String.self, "day"), event: try $0.decode(String.self, "event"), count: try $0.decode(Int.self, "n"))
        }
    }

    static func reportFlows(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        data.flows = try db.query("""
            SELECT from_segment, to_segment,
                   count(*) FILTER (WHERE changed_at > \(data.asOf) - interval '7 days') AS d7, count(*) AS d30
            FROM churnwatch.segment_changes
            WHERE changed_at > \(data.asOf) - interval '30 days' AND changed_at <= \(data.asOf) AND bundle_id = \(data.app)
            GROUP BY 1, 2
            """).map {
            ReportRows.Flow(from: try $0.decode(String.self, "from_segment"), to: try $0.decode(String.self, "to_segment"),
                            last7: try $0.decode(Int.self, "d7"), last30: try $0.decode(Int.self, "d30"))
        }
    }

    static func reportCancelPage(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        data.cancelViews = try db.query("""
            SELECT arm, coalesce(answer_kind, CASE WHEN answer IS NULL THEN 'none' ELSE 'default' END) AS shown, count(*) AS n
            FROM churnwatch.retention_message_requests
            WHERE bundle_id = \(data.app) AND signed_at > \(data.asOf) - make_interval(days => \(data.days)::int) AND signed_at <= \(data.asOf)
            GROUP BY 1, 2 ORDER BY 1, 2
            """).map {
            ReportRows.CancelViewCount(arm: try $0.decode(String.self, "arm"), shown: try $0.decode(String.self, "shown"),
                                       count: try $0.decode(Int.self, "n"))
        }
        (data.cancelViewers, data.cancelViewersStillRenewing) = try reportCancelPageViewers(db, app: data.app, asOf: data.asOf, days: data.days)
        data.cancelOutcomes = try cancelPageOutcomes(db, app: data.app, since: nil, asOf: data.asOf).map {
            ReportRows.Outcome(campaign: $0.campaign, offerId: $0.answerKind, entries: $0.entries, delivered: $0.delivered,
                               decided: $0.decided, saved: $0.saved, holdoutEntries: $0.holdoutEntries,
                               holdoutDecided: $0.holdoutDecided, holdoutSaved: $0.holdoutSaved,
                               medianDaysToSave: nil, revenueKept: $0.revenueKept)
        }
    }

    static func reportWinback(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        data.winback = try db.query("""
            SELECT campaign, status, count(*) AS n FROM churnwatch.winback_queue WHERE bundle_id = \(data.app) GROUP BY 1, 2 ORDER BY 1, 2
            """).map {
            ReportRows.WinbackCount(campaign: try $0.decode(String.self, "campaign"), status: try $0.decode(String.self, "status"),
                                    count: try $0.decode(Int.self, "n"))
        }
        guard !data.winback.isEmpty else { return }
        data.outcomes = try outcomeSummaries(db, app: data.app, since: nil, grouping: .offer, asOf: data.asOf).map {
            ReportRows.Outcome(campaign: $0.campaign, offerId: $0.offerId, entries: $0.entries, delivered: $0.delivered,
                               decided: $0.decided, saved: $0.saved, holdoutEntries: $0.holdoutEntries,
                               holdoutDecided: $0.holdoutDecided, holdoutSaved: $0.holdoutSaved,
                               medianDaysToSave: $0.medianDaysToSave, revenueKept: $0.revenueKept)
        }
    }

    /// The app's webhook endpoints: delivered in the window, waiting and dead now.
    static func reportWebhooks(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        let since = data.asOf.addingTimeInterval(-86_400 * Double(max(data.days, 1)))
        data.webhooks = try db.query("""
            SELECT e.name, e.url, e.enabled, e.consecutive_failures > 0 AS failing,
                (SELECT count(*) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name AND d.state = 'delivered'
                   AND d.finished_at > \(since) AND d.finished_at <= \(data.asOf)) AS delivered,
                (SELECT count(*) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name AND d.state = 'pending') AS pending,
                (SELECT extract(epoch FROM \(data.asOf) - min(d.created_at))::float8 FROM churnwatch.webhook_deliveries d
                 WHERE d.endpoint = e.name AND d.state = 'pending') AS oldest,
                (SELECT count(*) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name AND d.state = 'dead') AS dead,
                (SELECT d.last_error FROM churnwatch.webhook_deliveries d
                 WHERE d.endpoint = e.name AND d.state IN ('pending', 'dead') AND d.last_error IS NOT NULL
                 ORDER BY d.first_attempt_at DESC NULLS LAST LIMIT 1) AS last_error
            FROM churnwatch.webhook_endpoints e WHERE e.bundle_id = \(data.app) ORDER BY e.name
            """).map { row in
            ReportRows.WebhookRow(endpoint: try row.decode(String.self, "name"), url: try row.decode(String.self, "url"),
                                  enabled: try row.decode(Bool.self, "enabled"), failing: try row.decode(Bool.self, "failing"),
                                  delivered: try row.decode(Int.self, "delivered"), pending: try row.decode(Int.self, "pending"),
                                  oldestPendingSeconds: try row.decode(Double?.self, "oldest"), dead: try row.decode(Int.self, "dead"),
                                  lastError: try row.decode(String?.self, "last_error"))
        }
    }
}
