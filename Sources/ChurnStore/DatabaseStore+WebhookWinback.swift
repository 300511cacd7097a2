import ChurnModel
import Foundation
import Postgres

/// Where an endpoint stands, for `webhooks list`, `status` and `/metrics`.
public struct WebhookEndpointStats: Sendable, Equatable {
    public var endpoint: WebhookEndpoint
    public var pending = 0
    /// When the oldest pending delivery's message was written.
    public var oldestPending: Date?
    public var dead = 0
    public var delivered24h = 0
    public var lastDeliveredAt: Date?
    public var lastError: String?
}

extension DatabaseStore {
    /// The win-back consumers' side: for each campaign an enabled endpoint consumes, claims the
    /// entries whose `not_before` has come (as `winback claim` does, with consumer
    /// `webhook:<endpoint>`; held-out entries are never claimable) and writes each one's
    /// winback.ready message for that endpoint, in the same transaction: an entry is never
    /// claimed without its message. `body` renders the message (its offer signed now).
    /// Returns how many entries were claimed.
    @discardableResult
    public func webhookWinbackReady(limit: Int = 500, now: Date,
                                    body: @escaping @Sendable (WinbackQueueEntry) throws -> String) async throws -> Int {
        try await pool.withTransaction { db in
            let consumers = try db.query("""
                SELECT c.bundle_id, c.campaign, c.endpoint FROM churnwatch.webhook_consumers c
                JOIN churnwatch.webhook_endpoints e ON e.name = c.endpoint AND e.enabled ORDER BY c.endpoint, c.campaign
                """).map { (try $0.decode(String.self, "bundle_id"), try $0.decode(String.self, "campaign"), try $0.decode(String.self, "endpoint")) }
            var claimed = 0
            for (app, campaign, endpoint) in consumers {
                let entries = try Self.claimForWebhook(db, app: app, campaign: campaign, endpoint: endpoint, limit: limit, now: now)
                for entry in entries {
                    try db.execute("""
                        INSERT INTO churnwatch.webhook_messages (bundle_id, original_transaction_id, type, endpoint, winback_id, body)
                        VALUES (\(app), \(entry.originalTransactionId), 'winback.ready', \(endpoint), \(entry.id), \(try body(entry)))
                        """)
                }
                claimed += entries.count
            }
            return claimed
        }
    }

    private static func claimForWebhook(_ db: PostgresConnection, app: String, campaign: String, endpoint: String,
                                        limit: Int, now: Date) throws -> [WinbackQueueEntry] {
        try db.execute("""
            UPDATE churnwatch.winback_queue SET status = 'expired', updated_at = now()
            WHERE bundle_id = \(app) AND campaign = \(campaign) AND status = 'pending' AND expires_at <= \(now)
            """)
        // The claim lasts as long as a delivery can (30 days): the entry is settled by the
        // delivery (done, or pending again when it is dead), not by the lease.
        return try db.query("""
            WITH pick AS (
                SELECT id FROM churnwatch.winback_queue
                WHERE bundle_id = \(app) AND campaign = \(campaign) AND status = 'pending' AND not_before <= \(now)
                  AND (expires_at IS NULL OR expires_at > \(now))
                ORDER BY not_before, id LIMIT \(limit)
                FOR UPDATE SKIP LOCKED
            ), claimed AS (
                UPDATE churnwatch.winback_queue w
                SET status = 'claimed', claimed_by = \("webhook:" + endpoint), claimed_at = \(now),
                    claim_expires_at = \(now) + interval '30 days', updated_at = now()
                FROM pick WHERE w.id = pick.id
                RETURNING w.*
            )
            SELECT \(ChurnStore.winbackColumns) FROM claimed ORDER BY not_before, id
            """).map(ChurnStore.decodeWinbackEntry)
    }

    /// Every endpoint with what waits for it and what died, from the partial indexes (cheap
    /// enough for a sender to read every few seconds); with `delivered`, also its deliveries of
    /// the last 24 hours and its last delivery (for `list` and `status`).
    public func webhookStats(delivered: Bool = true) async throws -> [WebhookEndpointStats] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.endpointColumns),
                    (SELECT count(*) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name AND d.state = 'pending') AS pending,
                    (SELECT min(d.created_at) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name AND d.state = 'pending') AS oldest,
                    (SELECT count(*) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name AND d.state = 'dead') AS dead,
                    (SELECT d.last_error FROM churnwatch.webhook_deliveries d
                     WHERE d.endpoint = e.name AND d.state IN ('pending', 'dead') AND d.last_error IS NOT NULL
                     ORDER BY d.first_attempt_at DESC NULLS LAST LIMIT 1) AS last_error,
                    CASE WHEN \(delivered) THEN (SELECT count(*) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name
                        AND d.state = 'delivered' AND d.finished_at > now() - interval '24 hours') END AS delivered,
                    CASE WHEN \(delivered) THEN (SELECT max(d.finished_at) FROM churnwatch.webhook_deliveries d WHERE d.endpoint = e.name
                        AND d.state = 'delivered' AND d.finished_at > now() - interval '30 days') END AS last_delivered
                FROM churnwatch.webhook_endpoints e
                ORDER BY e.name
                """).map { row in
                var s = WebhookEndpointStats(endpoint: try Self.decodeEndpoint(row))
                s.pending = try row.decode(Int?.self, "pending") ?? 0
                s.oldestPending = try row.decode(Date?.self, "oldest")
                s.dead = try row.decode(Int?.self, "dead") ?? 0
                s.delivered24h = try row.decode(Int?.self, "delivered") ?? 0
                s.lastDeliveredAt = try row.decode(Date?.self, "last_delivered")
                s.lastError = try row.decode(String?.self, "last_error")
                return s
            }
        }
    }

    /// Messages written and not numbered yet (no sender running, or one behind).
    public func webhookUnsequenced() async throws -> Int {
        try await pool.withConnection { db in
            try db.query("SELECT count(*) FROM churnwatch.webhook_messages WHERE seq IS NULL")[0].decode(Int.self, at: 0)
        }
    }
}
