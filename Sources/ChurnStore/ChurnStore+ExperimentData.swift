import ChurnModel
import Foundation
import Postgres

extension ChurnStore {
    /// The counts of an experiment (`ExperimentCellCounts`) as of `asOf`: each subscriber counted once, at the first view
    /// recorded in the experiment (its arm and period). The long outcome is the cancel page's
    /// (`cancelPageOutcomes`): the horizon is the end of the period at the view
    /// (`churnwatch.cancel_page_horizon`); lost when it expired on the way (`lapsed`); saved: the subscription's period now ends after
    /// the horizon; lost: not saved and polled after the horizon.
    public func experimentCounts(_ name: String, asOf: Date, decisionHours: Int) async throws -> [ExperimentCellCounts] {
        try await pool.withConnection { db in
            let rows = try db.query("""
                WITH first AS (
                    SELECT DISTINCT ON (r.original_transaction_id) r.original_transaction_id, r.experiment_arm AS arm,
                           r.experiment_period AS period, r.signed_at, r.period_ends_at
                    FROM churnwatch.retention_message_requests r
                    WHERE r.bundle_id = \(app) AND r.experiment = \(name) AND r.signed_at <= \(asOf)
                    ORDER BY r.original_transaction_id, r.signed_at
                ), judged AS (
                    SELECT f.period, f.arm,
                           f.signed_at <= \(asOf)::timestamptz - make_interval(hours => \(decisionHours)::int) AS matured,
                           coalesce((SELECT ev.event <> 'auto_renew_disabled' FROM churnwatch.churn_events ev
                                     WHERE ev.original_transaction_id = f.original_transaction_id AND ev.bundle_id = \(app)
                                       AND ev.event IN ('auto_renew_disabled', 'auto_renew_enabled') AND ev.superseded_at IS NULL
                                       AND ev.occurred_at > f.signed_at
                                       AND ev.occurred_at <= f.signed_at + make_interval(hours => \(decisionHours)::int)
                                     ORDER BY ev.occurred_at DESC LIMIT 1), true) AS renewing,
                           CASE WHEN \(Self.lapsed) THEN 'lost' WHEN s.expires_at > h.horizon THEN 'saved'
                                WHEN h.horizon <= \(asOf) AND s.last_success_at > h.horizon THEN 'lost' END AS outcome,
                           (s.snapshot->>'renewal_price')::bigint AS price, s.snapshot->>'renewal_currency' AS currency
                    FROM first f LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = f.original_transaction_id
                    CROSS JOIN LATERAL (SELECT \(Self.horizon) AS horizon) h
                )
                SELECT period, arm, count(*) AS exposed, count(*) FILTER (WHERE matured) AS matured,
                       count(*) FILTER (WHERE matured AND renewing) AS renewing,
                       count(*) FILTER (WHERE outcome IS NOT NULL) AS decided, count(*) FILTER (WHERE outcome = 'saved') AS saved,
                       coalesce((SELECT jsonb_object_agg(c, p) FROM (
                           SELECT currency AS c, sum(price) AS p FROM judged j2
                           WHERE j2.period = j.period AND j2.arm = j.arm AND j2.outcome = 'saved' AND currency IS NOT NULL AND price IS NOT NULL
                           GROUP BY 1) x), '{}')::text AS saved_price
                FROM judged j GROUP BY period, arm ORDER BY period, arm
                """)
            return try rows.map { row in
                ExperimentCellCounts(
                    period: try row.decode(Int.self, "period"), arm: try row.decode(String.self, "arm"),
                    exposed: try row.decode(Int.self, "exposed"), matured: try row.decode(Int.self, "matured"),
                    renewing: try row.decode(Int.self, "renewing"), decided: try row.decode(Int.self, "decided"),
                    saved: try row.decode(Int.self, "saved"),
                    savedPrice: try JSONDecoder().decode([String: Int64].self, from: Data(try row.decode(String.self, "saved_price").utf8)))
            }
        }
    }
}
