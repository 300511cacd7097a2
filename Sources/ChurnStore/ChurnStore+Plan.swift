import Foundation
import Postgres

/// How many subscriptions a run would poll, by reason.
public struct PlanCounts: Sendable, Equatable {
    public var byReason: [DueReason: Int] = [:]
    /// Of the due, how many have legacy receipt data (polled through verifyReceipt).
    public var receiptOnly = 0
    /// Of the due, how many will probably need a history call (never polled, or past renewal).
    public var likelyHistory = 0
    public var total: Int { byReason.values.reduce(0, +) }
}

extension ChurnStore {
    /// The due selection as one statement per reason; each branch is served by its own index.
    /// Rows: (original_transaction_id, reason, priority), one per subscription (first reason).
    static func dueSelection(asOf: Date, windows w: PlanWindows) -> PostgresQuery {
        let startFrom = asOf.addingTimeInterval(-w.start)
        let endUntil = asOf.addingTimeInterval(w.end)
        let lapsedFrom = asOf.addingTimeInterval(-w.lapsed)
        let staleBefore = asOf.addingTimeInterval(-w.staleAfter)
        // Apple retries up to 60 days; one more look within the lapsed window sees how it ended.
        let retryFrom = asOf.addingTimeInterval(-(w.billingRetryLimit + w.lapsed))
        let recent = asOf.addingTimeInterval(-w.minInterval)
        return """
            SELECT DISTINCT ON (original_transaction_id) original_transaction_id, reason, priority
            FROM (
                SELECT original_transaction_id, 'new' AS reason, \(DueReason.new.priority) AS priority
                  FROM churnwatch.subscriptions WHERE last_success_at IS NULL
                    AND (last_polled_at IS NULL OR last_polled_at < \(recent) OR last_outcome = 'failed')
                UNION ALL
                SELECT original_transaction_id, 'failed', \(DueReason.failed.priority)
                  FROM churnwatch.subscriptions WHERE last_outcome = 'failed'
                UNION ALL
                SELECT original_transaction_id, 'billing_trouble', \(DueReason.billingTrouble.priority)
                  FROM churnwatch.subscriptions WHERE state IN ('billing_retry', 'grace_period')
                   AND expires_at >= \(retryFrom) AND (last_success_at IS NULL OR last_success_at < \(recent))
                UNION ALL
                SELECT original_transaction_id, 'at_risk', \(DueReason.atRisk.priority)
                  FROM churnwatch.subscriptions WHERE state = 'active'
                   AND (auto_renew = false OR price_increase_status = 0 OR auto_renew_product_id IS DISTINCT FROM product_id)
                   AND (last_success_at IS NULL OR last_success_at < \(recent))
                UNION ALL
                SELECT original_transaction_id, 'period_end', \(DueReason.periodEnd.priority)
                  FROM churnwatch.subscriptions WHERE expires_at BETWEEN \(lapsedFrom) AND \(endUntil)
                   AND (last_success_at IS NULL OR last_success_at < \(recent))
                UNION ALL
                SELECT original_transaction_id, 'period_start', \(DueReason.periodStart.priority)
                  FROM churnwatch.subscriptions WHERE period_start BETWEEN \(startFrom) AND \(asOf)
                   AND (last_success_at IS NULL OR last_success_at < \(recent))
                UNION ALL
                SELECT original_transaction_id, 'stale', \(DueReason.stale.priority)
                  FROM churnwatch.subscriptions WHERE last_success_at < \(staleBefore)
            ) AS due
            ORDER BY original_transaction_id, priority
            """
    }

    /// Counts what a run at `asOf` would poll. Writes nothing.
    public func planCounts(asOf: Date, windows: PlanWindows) async throws -> PlanCounts {
        let selection = Self.dueSelection(asOf: asOf, windows: windows)
        return try await pool.withConnection { db in
            var counts = PlanCounts()
            let rows = try db.query("""
                SELECT d.reason, count(*) AS n,
                       count(*) FILTER (WHERE s.receipt_data IS NOT NULL) AS receipt_only,
                       count(*) FILTER (WHERE s.last_success_at IS NULL OR s.expires_at <= \(asOf)) AS likely_history
                FROM (\(selection)) AS d
                JOIN churnwatch.subscriptions s USING (original_transaction_id)
                GROUP BY d.reason
                """)
            for row in rows {
                guard let reason = DueReason(rawValue: try row.decode(String.self, "reason")) else { continue }
                counts.byReason[reason] = try row.decode(Int.self, "n")
                counts.receiptOnly += try row.decode(Int.self, "receipt_only")
                counts.likelyHistory += try row.decode(Int.self, "likely_history")
            }
            return counts
        }
    }
}
