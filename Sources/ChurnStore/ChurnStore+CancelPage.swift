import ChurnModel
import Foundation
import Postgres

extension ChurnStore {
    /// The cancel page's outcomes (`churnwatch outcomes --campaign cancel_page`), one line per
    /// kind of answer the matched rules give: each subscriber's first view since `since` that a
    /// rule matched, treated (shown the rule's answer) against held out (shown the default).
    /// The horizon is the end of the period the subscriber was in at the view (the next renewal):
    /// `churnwatch.cancel_page_horizon` (the stored period end, or when it had passed, the next
    /// boundary by the period's length; 35 days after the view when nothing is known). Saved: the
    /// subscription's period now ends after the horizon (it renewed) and it did not expire on the
    /// way (`lapsed`). Lost: it expired on the way, or it is not saved and was polled
    /// after the horizon. Else not decided yet.
    public func cancelPageOutcomes(since: Date?, asOf: Date) async throws -> [OutcomeSummary] {
        try await pool.withConnection { db in try Self.cancelPageOutcomes(db, app: app, since: since, asOf: asOf) }
    }

    static func cancelPageOutcomes(_ db: PostgresConnection, app: String, since: Date?, asOf: Date) throws -> [OutcomeSummary] {
        let views: PostgresQuery = """
            WITH first AS (
                SELECT DISTINCT ON (r.original_transaction_id) r.original_transaction_id, r.arm, r.rule_kind, r.signed_at, r.period_ends_at
                FROM churnwatch.retention_message_requests r
                WHERE r.bundle_id = \(app) AND r.arm IN ('treated', 'holdout') AND r.rule_kind IS NOT NULL
                  AND (\(since)::timestamptz IS NULL OR r.signed_at >= \(since)::timestamptz) AND r.signed_at <= \(asOf)
                ORDER BY r.original_transaction_id, r.signed_at
            )
            SELECT f.rule_kind, f.arm = 'holdout' AS holdout,
                   CASE WHEN \(Self.lapsed) THEN 'lost' WHEN s.expires_at > h.horizon THEN 'saved'
                        WHEN h.horizon <= \(asOf) AND s.last_success_at > h.horizon THEN 'lost' END AS outcome,
                   (s.snapshot->>'renewal_price')::bigint AS price, s.snapshot->>'renewal_currency' AS currency
            FROM first f LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = f.original_transaction_id
            CROSS JOIN LATERAL (SELECT \(Self.horizon) AS horizon) h
            """
        var summaries: [OutcomeSummary] = []
        for row in try db.query("""
            WITH v AS (\(views))
            SELECT rule_kind,
                count(*) FILTER (WHERE NOT holdout) AS entries,
                count(*) FILTER (WHERE NOT holdout AND outcome IS NOT NULL) AS decided,
                count(*) FILTER (WHERE NOT holdout AND outcome = 'saved') AS saved,
                count(*) FILTER (WHERE holdout) AS holdout_entries,
                count(*) FILTER (WHERE holdout AND outcome IS NOT NULL) AS holdout_decided,
                count(*) FILTER (WHERE holdout AND outcome = 'saved') AS holdout_saved,
                coalesce(jsonb_object_agg(currency, kept) FILTER (WHERE currency IS NOT NULL), '{}')::text AS kept
            FROM (SELECT rule_kind, holdout, outcome, currency,
                         sum(price) FILTER (WHERE NOT holdout AND outcome = 'saved') OVER (PARTITION BY rule_kind, currency) AS kept
                  FROM v) AS x
            GROUP BY 1 ORDER BY 1
            """) {
            let kept = try JSONDecoder().decode([String: Int64?].self, from: Data(try row.decode(String.self, "kept").utf8))
            let entries = try row.decode(Int.self, "entries")
            summaries.append(OutcomeSummary(
                campaign: "cancel_page", offerId: nil, productId: nil, entries: entries, delivered: entries,
                decided: try row.decode(Int.self, "decided"), saved: try row.decode(Int.self, "saved"),
                holdoutEntries: try row.decode(Int.self, "holdout_entries"), holdoutDecided: try row.decode(Int.self, "holdout_decided"),
                holdoutSaved: try row.decode(Int.self, "holdout_saved"), medianDaysToSave: nil,
                revenueKept: kept.compactMapValues { $0 }.filter { $0.value > 0 }, answerKind: try row.decode(String.self, "rule_kind")))
        }
        return summaries
    }

    /// Whether subscription `s` lapsed between the view `f` and its horizon `h`: an `expired` event
    /// dated after the view and by a day past the horizon. A customer who left at the horizon and
    /// came back later has a period end after the horizon again: without this, saved.
    static let lapsed: PostgresQuery = """
        EXISTS (SELECT 1 FROM churnwatch.churn_events ev
                WHERE ev.original_transaction_id = f.original_transaction_id AND ev.bundle_id = s.bundle_id AND ev.event = 'expired'
                  AND ev.superseded_at IS NULL AND ev.occurred_at > f.signed_at AND ev.occurred_at <= h.horizon + interval '1 day')
        """

    /// The horizon of a first view `f` of subscription `s` (docs/contracts.md "The cancel page").
    static let horizon: PostgresQuery = """
        churnwatch.cancel_page_horizon(f.signed_at, f.period_ends_at,
            ((s.snapshot->>'period_end_ms')::bigint - (s.snapshot->>'period_start_ms')::bigint) * interval '1 millisecond')
        """
}
