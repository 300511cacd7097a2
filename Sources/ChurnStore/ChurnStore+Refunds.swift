import AppStoreModels
import ChurnModel
import Foundation
import Postgres

extension ChurnStore {
    /// The refund requests and decisions of a feed commit, in its transaction. A request read
    /// twice is kept once (its notification UUID); one read after its deadline is recorded as
    /// not sent (`expired`) at once. A decision marks the requests about its transaction made
    /// before it that has none yet. Returns how many requests it recorded as read too late.
    @discardableResult
    static func refundNoticesWrite(_ db: PostgresConnection, app: String, _ notices: [RefundNotice], receivedAt: Date) throws -> Int {
        var requests: [RefundRequestNotice] = []
        var decisions: [(transactionId: String, decision: RefundDecision, at: Date)] = []
        for notice in notices {
            switch notice {
            case .request(let r): requests.append(r)
            case .decision(let tx, _, let d, let at): decisions.append((tx, d, at))
            }
        }
        var late = 0
        if !requests.isEmpty {
            late = try db.query("""
                WITH inserted AS (
                INSERT INTO churnwatch.refund_requests (bundle_id, notification_uuid, original_transaction_id, transaction_id,
                                                        environment, reason, requested_at, deadline, period_start, period_end,
                                                        received_at, state, policy_branch)
                SELECT \(app), u.uuid, u.otid, u.tx, u.env, u.reason, u.requested, u.deadline, u.ps, u.pe, \(receivedAt),
                       CASE WHEN u.deadline <= \(receivedAt) THEN 'not_sent' ELSE 'pending' END,
                       CASE WHEN u.deadline <= \(receivedAt) THEN 'expired' END
                FROM unnest(\(requests.map(\.notificationUUID))::uuid[], \(requests.map(\.originalTransactionId))::text[],
                            \(requests.map(\.transactionId))::text[], \(requests.map(\.environment.rawValue))::text[],
                            \(requests.map(\.reason))::text[], \(requests.map(\.requestedAt))::timestamptz[],
                            \(requests.map(\.deadline))::timestamptz[], \(requests.map(\.periodStart))::timestamptz[],
                            \(requests.map(\.periodEnd))::timestamptz[])
                     AS u(uuid, otid, tx, env, reason, requested, deadline, ps, pe)
                ON CONFLICT (notification_uuid) DO NOTHING
                RETURNING state)
                SELECT count(*) FILTER (WHERE state = 'not_sent')::int AS late FROM inserted
                """)[0].decode(Int.self, "late")
        }
        // One decision answers one request: the latest about its transaction, made before it, not
        // decided yet (a customer may ask again after a refusal; Apple's second answer is the
        // second request's).
        for d in decisions {
            try db.execute("""
                UPDATE churnwatch.refund_requests SET decision = \(d.decision.rawValue), decided_at = \(d.at)
                WHERE notification_uuid = (
                    SELECT notification_uuid FROM churnwatch.refund_requests
                    WHERE transaction_id = \(d.transactionId) AND requested_at <= \(d.at) AND decision IS NULL
                    ORDER BY requested_at DESC, notification_uuid DESC LIMIT 1)
                """)
        }
        return late
    }

    /// Claims up to `limit` refund requests to answer at `now`, soonest deadline first: pending
    /// ones, and ones whose sender's lease ran out (a sync killed mid-answer). Each becomes
    /// `sending` until `now + lease`, so a sync beside this one skips it. Requests whose deadline
    /// passed unanswered are first recorded as not sent (`expired`).
    /// `excluding`: requests this pass already tried (one left pending after a temporary
    /// failure waits for the next sync, not for the next claim of the same pass).
    public func refundRequestsClaim(now: Date, limit: Int, lease: TimeInterval, excluding: [UUID] = []) async throws
        -> (expired: Int, claimed: [ClaimedRefundRequest]) {
        try await pool.withTransaction { db in
            let expired = try db.execute("""
                UPDATE churnwatch.refund_requests SET state = 'not_sent', policy_branch = 'expired', lease_until = NULL
                WHERE state IN ('pending', 'sending') AND deadline <= \(now) AND (state = 'pending' OR lease_until <= \(now))
                  AND bundle_id = \(app)
                """)
            let rows = try db.query("""
                WITH due AS (
                    SELECT notification_uuid FROM churnwatch.refund_requests
                    WHERE state IN ('pending', 'sending') AND deadline > \(now) AND (state = 'pending' OR lease_until <= \(now))
                      AND NOT (notification_uuid = ANY(\(excluding)::uuid[])) AND bundle_id = \(app)
                    ORDER BY deadline, notification_uuid LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                UPDATE churnwatch.refund_requests r SET state = 'sending', attempts = r.attempts + 1,
                       lease_until = \(now.addingTimeInterval(lease))
                FROM due WHERE r.notification_uuid = due.notification_uuid
                RETURNING r.notification_uuid, r.original_transaction_id, r.transaction_id, r.environment, r.requested_at, r.deadline,
                          r.period_start, r.period_end, r.attempts,
                          coalesce((SELECT s.had_trial FROM churnwatch.subscriptions s
                                    WHERE s.original_transaction_id = r.original_transaction_id), false) AS trial_seen
                """)
            let claimed = try rows.map { row -> ClaimedRefundRequest in
                let env = try row.decode(String.self, "environment")
                return ClaimedRefundRequest(
                    notificationUUID: try row.decode(UUID.self, "notification_uuid"),
                    originalTransactionId: try row.decode(String.self, "original_transaction_id"),
                    transactionId: try row.decode(String.self, "transaction_id"),
                    environment: AppStoreEnvironment(rawValue: env) ?? .production,
                    facts: RefundRequestFacts(requestedAt: try row.decode(Date.self, "requested_at"), deadline: try row.decode(Date.self, "deadline"),
                                              periodStart: try row.decode(Date?.self, "period_start"),
                                              periodEnd: try row.decode(Date?.self, "period_end"), trialSeen: try row.decode(Bool.self, "trial_seen")),
                    consent: nil, attempts: try row.decode(Int.self, "attempts"))
            }
            let consents = try Self.refundConsents(db, claimed.map(\.originalTransactionId))
            return (expired, claimed.map { var c = $0; c.consent = consents[c.originalTransactionId]; return c })
        }
    }

    /// What the app recorded for the customers of these subscriptions: the row for the
    /// subscription's original transaction id, else the one for its app account token.
    static func refundConsents(_ db: PostgresConnection, _ ids: [String]) throws -> [String: RefundConsent] {
        guard !ids.isEmpty else { return [:] }
        var out: [String: RefundConsent] = [:]
        for row in try db.query("""
            SELECT u.id, c.customer_consented, c.delivery_status, c.sample_content_provided
            FROM unnest(\(ids)::text[]) AS u(id)
            LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = u.id
            CROSS JOIN LATERAL (
                SELECT customer_consented, delivery_status, sample_content_provided FROM churnwatch.refund_consent c
                WHERE c.original_transaction_id = u.id OR (s.app_account_token IS NOT NULL AND c.app_account_token = s.app_account_token)
                ORDER BY (c.original_transaction_id IS NOT NULL) DESC LIMIT 1) AS c
            """) {
            out[try row.decode(String.self, "id")] = RefundConsent(
                customerConsented: try row.decode(Bool.self, "customer_consented"),
                deliveryStatus: try row.decode(String?.self, "delivery_status").flatMap(DeliveryStatus.init(rawValue:)),
                sampleContentProvided: try row.decode(Bool?.self, "sample_content_provided"))
        }
        return out
    }

    /// Records what became of attempt `attempt` (``ClaimedRefundRequest/attempts``). Only a
    /// request this sender still holds (`sending`, the same attempt) is changed: one whose lease
    /// ran out and that another sync took over is left to that sync. Returns whether it was changed.
    @discardableResult
    public func refundRequestRecord(_ id: UUID, attempt: Int, _ result: RefundAttemptResult) async throws -> Bool {
        try await pool.withTransaction { db in
            let changed: Int
            switch result {
            case .answered(let body, let branch, let sentAt, let status):
                changed = try db.execute("""
                    UPDATE churnwatch.refund_requests SET state = 'answered', policy_branch = \(branch.rawValue), sent = \(body),
                           answered_at = \(sentAt), apple_status = \(status), last_error = NULL, lease_until = NULL
                    WHERE notification_uuid = \(id) AND state = 'sending' AND attempts = \(attempt)
                    """)
            case .notSent(let branch):
                changed = try db.execute("""
                    UPDATE churnwatch.refund_requests SET state = 'not_sent', policy_branch = \(branch.rawValue), lease_until = NULL
                    WHERE notification_uuid = \(id) AND state = 'sending' AND attempts = \(attempt)
                    """)
            case .retry(let body, let branch, let error):
                changed = try db.execute("""
                    UPDATE churnwatch.refund_requests SET state = 'pending', policy_branch = COALESCE(\(branch?.rawValue), policy_branch),
                           sent = COALESCE(\(body), sent),
                           last_error = \(error), lease_until = NULL
                    WHERE notification_uuid = \(id) AND state = 'sending' AND attempts = \(attempt)
                    """)
            case .failed(let body, let branch, let status, let error):
                changed = try db.execute("""
                    UPDATE churnwatch.refund_requests SET state = 'failed', policy_branch = \(branch.rawValue), sent = \(body),
                           apple_status = \(status), last_error = \(error), lease_until = NULL
                    WHERE notification_uuid = \(id) AND state = 'sending' AND attempts = \(attempt)
                    """)
            }
            return changed == 1
        }
    }
}
