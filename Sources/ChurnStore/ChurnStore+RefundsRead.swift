import ChurnModel
import Foundation
import Postgres

extension ChurnStore {
    /// The refund requests Apple signed in `[since, until)`, newest first, at most `limit`.
    public func refundRequests(since: Date, until: Date, limit: Int) async throws -> [RefundRequestRow] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT notification_uuid, original_transaction_id, transaction_id, environment, reason, requested_at, deadline, state,
                       policy_branch, attempts, answered_at, apple_status, last_error, decision, decided_at
                FROM churnwatch.refund_requests
                WHERE requested_at >= \(since) AND requested_at < \(until) AND bundle_id = \(app)
                ORDER BY requested_at DESC, notification_uuid LIMIT \(limit)
                """).map { row in
                RefundRequestRow(
                    notificationUUID: try row.decode(UUID.self, "notification_uuid"),
                    originalTransactionId: try row.decode(String.self, "original_transaction_id"),
                    transactionId: try row.decode(String.self, "transaction_id"), environment: try row.decode(String.self, "environment"),
                    reason: try row.decode(String?.self, "reason"), requestedAt: try row.decode(Date.self, "requested_at"),
                    deadline: try row.decode(Date.self, "deadline"), state: try row.decode(String.self, "state"),
                    policyBranch: try row.decode(String?.self, "policy_branch"), attempts: try row.decode(Int.self, "attempts"),
                    answeredAt: try row.decode(Date?.self, "answered_at"), appleStatus: try row.decode(Int?.self, "apple_status"),
                    lastError: try row.decode(String?.self, "last_error"), decision: try row.decode(String?.self, "decision"),
                    decidedAt: try row.decode(Date?.self, "decided_at"))
            }
        }
    }

    /// The refund requests Apple signed in `[since, until)`, counted: answered in time, not
    /// sent, refused, still open, and Apple's decisions, in all and by policy branch.
    public func refundSummary(since: Date, until: Date) async throws -> RefundSummary {
        try await pool.withConnection { db in try Self.refundSummary(db, app: app, since: since, until: until) }
    }

    /// The report's panel: the requests signed in its window.
    static func reportRefunds(_ db: PostgresConnection, _ data: inout ReportRows) throws {
        let until = data.asOf
        data.refunds = try refundSummary(db, app: data.app, since: until.addingTimeInterval(-86_400 * Double(max(data.days, 1))), until: until)
    }

    static func refundSummary(_ db: PostgresConnection, app: String, since: Date, until: Date) throws -> RefundSummary {
        do {
            var summary = RefundSummary()
            for row in try db.query("""
                SELECT COALESCE(policy_branch, 'pending') AS branch, state, count(*) AS n,
                       count(*) FILTER (WHERE decision = 'refunded') AS refunded,
                       count(*) FILTER (WHERE decision = 'declined') AS declined
                FROM churnwatch.refund_requests
                WHERE requested_at >= \(since) AND requested_at < \(until) AND bundle_id = \(app)
                GROUP BY 1, 2 ORDER BY 1, 2
                """) {
                let (branch, state) = (try row.decode(String.self, "branch"), try row.decode(String.self, "state"))
                let (n, refunded, declined) = (try row.decode(Int.self, "n"), try row.decode(Int.self, "refunded"), try row.decode(Int.self, "declined"))
                summary.requests += n
                summary.refunded += refunded
                summary.declined += declined
                switch RefundRequestState(rawValue: state) {
                case .answered: summary.answeredInTime += n
                case .notSent: summary.notSent += n
                case .failed: summary.failed += n
                case .pending, .sending, nil: summary.open += n
                }
                if let i = summary.byBranch.firstIndex(where: { $0.branch == branch }) {
                    summary.byBranch[i].requests += n
                    summary.byBranch[i].refunded += refunded
                    summary.byBranch[i].declined += declined
                } else {
                    summary.byBranch.append(.init(branch: branch, requests: n, refunded: refunded, declined: declined))
                }
            }
            return summary
        }
    }
}
