import ChurnModel
import Foundation
import Postgres

extension ChurnStore {
    /// Segments whose next renewal is in doubt: their renewal price is revenue at risk.
    static let revenueAtRiskSegments = Segment.revenueAtRisk.map(\.rawValue)

    /// Billing trouble now, and the recovery curve. An episode is one stretch of billing trouble
    /// of one subscription: its first failure is the earliest `billing_retry_started` or
    /// `grace_period_started` before the same end (the first `billing_recovered`, `expired` or
    /// `refunded` after it, or none yet). Episodes whose first failure falls in the window count;
    /// for day d, those at least d days old are observed and those recovered within d days are
    /// recovered. Trouble already present at a subscription's first poll has no start event and
    /// is not counted (the first poll is a baseline).
    static func reportBilling(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        for row in try db.query("""
            SELECT segment, count(*) AS n FROM churnwatch.subscription_segments
            WHERE segment IN ('billing_retry', 'grace_period') AND bundle_id = \(data.app) GROUP BY segment
            """) {
            let n = try row.decode(Int.self, "n")
            if try row.decode(String.self, "segment") == "billing_retry" { data.billing.inRetry = n } else { data.billing.inGrace = n }
        }
        let maxDay = min(max(data.days, 1), 60)
        data.billing.recovery = try db.query("""
            WITH starts AS (
                SELECT s.original_transaction_id AS otid, s.occurred_at AS started, e.occurred_at AS ended, e.event AS ending
                FROM churnwatch.churn_events s
                LEFT JOIN LATERAL (
                    SELECT x.occurred_at, x.event FROM churnwatch.churn_events x
                    WHERE x.original_transaction_id = s.original_transaction_id
                      AND x.event IN ('billing_recovered', 'expired', 'refunded')
                      AND x.occurred_at >= s.occurred_at AND x.detected_at <= \(data.asOf) AND x.superseded_at IS NULL
                    ORDER BY x.occurred_at LIMIT 1) e ON true
                WHERE s.event IN ('billing_retry_started', 'grace_period_started') AND s.bundle_id = \(data.app) AND s.superseded_at IS NULL
                  AND s.detected_at > \(data.asOf) - \(data.days)::int * interval '1 day' AND s.detected_at <= \(data.asOf)
                  AND s.occurred_at > \(data.asOf) - \(data.days)::int * interval '1 day' AND s.occurred_at <= \(data.asOf)
            ), episodes AS (
                -- Whole days since the first failure (age) and until the recovery (took, rounded up).
                SELECT floor(extract(epoch FROM \(data.asOf) - min(started)) / 86400)::int AS age,
                       CASE WHEN ending = 'billing_recovered' THEN ceil(extract(epoch FROM ended - min(started)) / 86400)::int END AS took
                FROM starts GROUP BY otid, ended, ending
            ), histogram AS (
                SELECT age, took, count(*) AS n FROM episodes GROUP BY 1, 2
            )
            SELECT d.day, coalesce(sum(n) FILTER (WHERE age >= d.day), 0)::bigint AS observed,
                   coalesce(sum(n) FILTER (WHERE age >= d.day AND took <= d.day), 0)::bigint AS recovered
            FROM generate_series(0, \(maxDay)::int) AS d(day) LEFT JOIN histogram ON true
            GROUP BY d.day ORDER BY d.day
            """).map {
            ReportRows.RecoveryPoint(day: try $0.decode(Int.self, "day"), observed: try $0.decode(Int.self, "observed"),
                                     recovered: try $0.decode(Int.self, "recovered"))
        }
    }

    /// Revenue at risk, when `subscription_segments` stores renewal prices (`renewal_price` in
    /// milliunits and `renewal_currency`, added by the retention-loop work); nil when the columns
    /// are absent or no at-risk subscription has a price.
    static func reportRevenue(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        let columns = try db.query("""
            SELECT count(*) FROM pg_attribute
            WHERE attrelid = 'churnwatch.subscription_segments'::regclass AND attnum > 0 AND NOT attisdropped
              AND attname IN ('renewal_price', 'renewal_currency')
            """)[0].decode(Int.self, at: 0)
        guard columns == 2 else { return }
        let rows = try db.query("""
            SELECT segment, renewal_currency::text AS currency, count(*) AS n, sum(renewal_price)::bigint AS amount
            FROM churnwatch.subscription_segments
            WHERE segment = ANY(\(revenueAtRiskSegments)) AND renewal_price IS NOT NULL AND renewal_currency IS NOT NULL
              AND bundle_id = \(data.app)
            GROUP BY 1, 2
            """).map {
            ReportRows.RevenueRow(segment: try $0.decode(String.self, "segment"), currency: try $0.decode(String.self, "currency"),
                                  subscriptions: try $0.decode(Int.self, "n"), milliunits: try $0.decode(Int64.self, "amount"))
        }
        data.revenue = rows
    }

    /// The 10 newest runs as of `asOf`: counts from the run row (from its items while it is not
    /// finished), Apple calls and 429s summed over its workers' stats, and the time its workers
    /// were at work (the hours between an interruption and its resume don't count).
    static func reportRuns(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        var runs = try db.query("""
            SELECT r.id, r.kind, r.status, r.as_of, r.started_at, r.finished_at, r.due,
                   CASE WHEN r.finished_at IS NULL THEN (SELECT count(*) FROM churnwatch.run_items i WHERE i.run_id = r.id AND i.status = 'done') ELSE r.polled END AS polled,
                   CASE WHEN r.finished_at IS NULL THEN (SELECT count(*) FROM churnwatch.run_items i WHERE i.run_id = r.id AND i.status = 'failed') ELSE r.failed END AS failed
            FROM churnwatch.runs r WHERE r.as_of <= \(data.asOf) AND r.bundle_id = \(data.app) ORDER BY r.id DESC LIMIT 10
            """).map { row in
            let started = try row.decode(Date.self, "started_at"), finished = try row.decode(Date?.self, "finished_at")
            return ReportRows.RunRow(id: try row.decode(Int64.self, "id"), kind: try row.decode(String.self, "kind"),
                                     status: try row.decode(String.self, "status"), asOf: try row.decode(Date.self, "as_of"),
                                     due: try row.decode(Int.self, "due"), polled: try row.decode(Int.self, "polled"),
                                     failed: try row.decode(Int.self, "failed"), calls: [:], http429: nil,
                                     durationSeconds: finished.map { $0.timeIntervalSince(started) })
        }
        let ids = runs.map(\.id)
        guard !ids.isEmpty else { return }
        var calls: [Int64: [String: Int]] = [:]
        for row in try db.query("""
            SELECT w.run_id, c.key, sum((c.value #>> '{}')::numeric)::bigint AS n
            FROM churnwatch.run_workers w,
                 jsonb_each(CASE WHEN jsonb_typeof(w.stats -> 'calls') = 'object' THEN w.stats -> 'calls' ELSE '{}' END) AS c
            WHERE w.run_id = ANY(\(ids)) AND jsonb_typeof(c.value) = 'number'
            GROUP BY 1, 2
            """) {
            calls[try row.decode(Int64.self, "run_id"), default: [:]][try row.decode(String.self, "key")] = try row.decode(Int.self, "n")
        }
        var http429: [Int64: Int] = [:]
        var spans: [Int64: [(Date, Date)]] = [:]
        for row in try db.query("""
            SELECT run_id, started_at, seen_at,
                   CASE WHEN jsonb_typeof(stats -> 'http_429') = 'number' THEN (stats ->> 'http_429')::numeric::bigint END AS http_429
            FROM churnwatch.run_workers WHERE run_id = ANY(\(ids))
            """) {
            let id = try row.decode(Int64.self, "run_id")
            let start = try row.decode(Date.self, "started_at")
            spans[id, default: []].append((start, max(start, try row.decode(Date.self, "seen_at"))))
            if let n = try row.decode(Int?.self, "http_429") { http429[id, default: 0] += n }
        }
        for i in runs.indices {
            let id = runs[i].id
            runs[i].calls = calls[id] ?? [:]
            runs[i].http429 = http429[id]
            if let s = spans[id], !s.isEmpty { runs[i].durationSeconds = RunStatus.unionLength(s) }
        }
        data.runs = runs
    }
}
