import ChurnModel
import Foundation
import Postgres

/// A delivery a sender holds (leased): what to send, and where it stands.
public struct WebhookDelivery: Sendable, Equatable {
    public var endpoint: String
    public var messageId: Int64
    public var seq: Int64
    public var type: String
    /// The exact bytes sent on every attempt.
    public var body: String
    /// Failed attempts before this one.
    public var attempts: Int
    public var winbackId: Int64?
    public var createdAt: Date
}

/// What became of one attempt, for ``DatabaseStore/webhookSettle(_:)``.
public struct WebhookSettlement: Sendable, Equatable {
    public typealias Result = WebhookNext
    public var endpoint: String
    public var messageId: Int64
    public var winbackId: Int64?
    public var result: Result
    public var status: Int?
    public var error: String?

    public init(endpoint: String, messageId: Int64, winbackId: Int64?, result: Result, status: Int?, error: String?) {
        (self.endpoint, self.messageId, self.winbackId, self.result, self.status, self.error) = (endpoint, messageId, winbackId, result, status, error)
    }
}

extension DatabaseStore {
    static let sequenceLock = PostgresAdvisoryLockKey.named("churnwatch.webhook_sequence")

    /// Numbers the messages committed since the last call, in the order they became visible,
    /// and writes their deliveries (one per enabled endpoint of the app that takes the type, or
    /// the one endpoint a message names). One sender at a time numbers (an advisory lock; the
    /// others skip). Returns how many were numbered.
    @discardableResult
    public func webhookSequence(limit: Int = 5_000) async throws -> Int {
        try await pool.withTransaction { db in
            guard try db.query("SELECT pg_try_advisory_xact_lock(\(Self.sequenceLock))")[0].decode(Bool.self, at: 0) else { return 0 }
            try db.runScript("SET LOCAL jit = off")
            return try db.query("""
                WITH fresh AS (
                    SELECT id FROM churnwatch.webhook_messages WHERE seq IS NULL ORDER BY id LIMIT \(limit)
                ), numbered AS (
                    SELECT id, nextval('churnwatch.webhook_message_seq') AS seq FROM fresh
                ), done AS (
                    UPDATE churnwatch.webhook_messages m SET seq = numbered.seq FROM numbered WHERE m.id = numbered.id
                    RETURNING m.id, m.seq, m.bundle_id, m.original_transaction_id, m.type, m.endpoint
                ), fanned AS (
                    INSERT INTO churnwatch.webhook_deliveries (endpoint, message_id, seq, original_transaction_id)
                    SELECT e.name, done.id, done.seq, done.original_transaction_id
                    FROM done JOIN churnwatch.webhook_endpoints e ON e.bundle_id = done.bundle_id AND e.enabled
                     AND (CASE WHEN done.endpoint IS NULL THEN cardinality(e.types) = 0 OR done.type = ANY(e.types)
                               ELSE e.name = done.endpoint END)
                    RETURNING 1
                )
                SELECT count(*) FROM done
                """)[0].decode(Int.self, at: 0)
        }
    }

    /// Leases up to `limit` deliveries of `endpoint` for `lease` seconds: each the head of its
    /// subscription's line (the pending delivery of lowest seq), due, and not leased by another
    /// sender. A line's next delivery is never leased while its head is pending.
    public func webhookClaim(endpoint: String, limit: Int, lease: TimeInterval, sender: String) async throws -> [WebhookDelivery] {
        guard limit > 0 else { return [] }
        return try await pool.withTransaction { db in
            // The walk must follow the due index and stop at the limit: after an ANALYZE of the
            // table while it was empty, a burst of 20,000 deliveries was planned as a scan of
            // every pending row, each probed for its line's head. And no JIT: its compilation
            // (about 250 ms) once cost estimates grew would dwarf a claim that reads 32 rows.
            try db.runScript("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL jit = off")
            return try db.query("""
                WITH due AS MATERIALIZED (
                    -- Due deliveries in the order they fell due, each kept only when it heads its
                    -- line (the lowest pending seq of its subscription): the walk stops at
                    -- `limit`, so a claim reads about what it takes, whatever the backlog. The
                    -- head is a correlated min(), one index probe per candidate, a plan that holds
                    -- before statistics exist (as NOT EXISTS, a fresh burst of 20,000 rows was
                    -- planned as a scan of the whole line index per candidate: 12 ms a claim).
                    SELECT d.message_id FROM churnwatch.webhook_deliveries d
                    WHERE d.endpoint = \(endpoint) AND d.state = 'pending' AND d.next_attempt_at <= now()
                      AND (d.lease_until IS NULL OR d.lease_until < now())
                      AND d.seq = (
                          SELECT min(e.seq) FROM churnwatch.webhook_deliveries e
                          WHERE e.endpoint = d.endpoint AND e.state = 'pending' AND e.original_transaction_id = d.original_transaction_id)
                    ORDER BY d.next_attempt_at, d.seq LIMIT \(limit)
                ), leased AS (
                    -- The walk's rows found by their key, as an array: a join left to the planner
                    -- was planned from stale statistics as a scan of every pending row, the walk's
                    -- result matched against each (130 ms to 2.3 s a claim at 20,000 waiting).
                    UPDATE churnwatch.webhook_deliveries d
                    SET lease_until = now() + make_interval(secs => \(lease)), leased_by = \(sender),
                        first_attempt_at = coalesce(d.first_attempt_at, now())
                    WHERE d.endpoint = \(endpoint) AND d.message_id = ANY(ARRAY(SELECT message_id FROM due)) AND d.state = 'pending'
                      AND (d.lease_until IS NULL OR d.lease_until < now())
                    RETURNING d.message_id, d.seq, d.attempts
                )
                SELECT l.message_id, l.seq, l.attempts, m.type, m.body, m.winback_id, m.created_at
                FROM leased l JOIN churnwatch.webhook_messages m ON m.id = l.message_id
                ORDER BY l.seq
                """).map { row in
                WebhookDelivery(endpoint: endpoint, messageId: try row.decode(Int64.self, "message_id"), seq: try row.decode(Int64.self, "seq"),
                                type: try row.decode(String.self, "type"), body: try row.decode(String.self, "body"),
                                attempts: try row.decode(Int.self, "attempts"), winbackId: try row.decode(Int64?.self, "winback_id"),
                                createdAt: try row.decode(Date.self, "created_at"))
            }
        }
    }

    /// Writes what became of attempts, in one transaction: each delivery's state, its endpoint's
    /// health (a 2xx ends a failing spell and brings the endpoint's waiting lines forward, a
    /// failure starts or extends one, a Retry-After pauses it, 410 disables it), and the win-back
    /// entries the messages carried (done when delivered, pending again when dead).
    public func webhookSettle(_ settlements: [WebhookSettlement]) async throws {
        guard !settlements.isEmpty else { return }
        let endpoints = settlements.map(\.endpoint), ids = settlements.map(\.messageId)
        let states = settlements.map { Self.state($0.result) }, waits = settlements.map { Self.wait($0.result) }
        let statuses = settlements.map { $0.status.map(Int64.init) ?? -1 }, errors = settlements.map { String(($0.error ?? "").prefix(500)) }
        try await pool.withTransaction { db in
            try db.execute("""
                UPDATE churnwatch.webhook_deliveries d SET
                    state = CASE u.state WHEN 'delivered' THEN 'delivered' WHEN 'dead' THEN 'dead' ELSE 'pending' END,
                    attempts = d.attempts + CASE WHEN u.state = 'released' THEN 0 ELSE 1 END,
                    next_attempt_at = CASE WHEN u.state = 'retry' THEN now() + make_interval(secs => u.wait) ELSE d.next_attempt_at END,
                    lease_until = NULL, leased_by = NULL,
                    last_status = CASE WHEN u.state = 'released' THEN d.last_status ELSE nullif(u.status, -1) END,
                    last_error = CASE WHEN u.state = 'released' THEN d.last_error ELSE nullif(u.error, '') END,
                    finished_at = CASE WHEN u.state IN ('delivered', 'dead') THEN now() END
                FROM unnest(\(endpoints)::text[], \(ids)::bigint[], \(states)::text[], \(waits)::float8[], \(statuses)::int[], \(errors)::text[])
                     AS u(endpoint, message_id, state, wait, status, error)
                WHERE d.endpoint = u.endpoint AND d.message_id = u.message_id AND d.state = 'pending'
                """)
            try Self.settleEndpoints(db, settlements)
            try Self.settleWinback(db, settlements)
        }
    }

    static func state(_ result: WebhookSettlement.Result) -> String {
        switch result {
        case .delivered: "delivered"
        case .retry: "retry"
        case .dead: "dead"
        case .gone: "gone"
        case .released: "released"
        }
    }

    static func wait(_ result: WebhookSettlement.Result) -> Double {
        if case .retry(let wait, _) = result { return wait }
        return 0
    }

    private static func settleEndpoints(_ db: PostgresConnection, _ settlements: [WebhookSettlement]) throws {
        var delivered: Set<String> = [], failed: [String: Int] = [:], gone: Set<String> = [], pause: [String: Double] = [:]
        for s in settlements {
            switch s.result {
            case .delivered: delivered.insert(s.endpoint)
            case .retry(_, let p): failed[s.endpoint, default: 0] += 1; if let p { pause[s.endpoint] = max(pause[s.endpoint] ?? 0, p) }
            case .dead: failed[s.endpoint, default: 0] += 1
            case .gone: gone.insert(s.endpoint)
            case .released: break
            }
        }
        // A failure after a success in the same batch still counts: the endpoint is failing now.
        let healthy = Array(delivered.subtracting(failed.keys))
        if !healthy.isEmpty {
            let back = try db.query("""
                UPDATE churnwatch.webhook_endpoints SET consecutive_failures = 0, failing_since = NULL, paused_until = NULL
                WHERE name = ANY(\(healthy)) AND consecutive_failures > 0
                RETURNING name
                """).map { try $0.decode(String.self, at: 0) }
            if !back.isEmpty {
                try db.execute("""
                    UPDATE churnwatch.webhook_deliveries SET next_attempt_at = now()
                    WHERE endpoint = ANY(\(back)) AND state = 'pending' AND next_attempt_at > now()
                    """)
            }
        }
        if !failed.isEmpty {
            let names = Array(failed.keys), counts = names.map { Int64(failed[$0]!) }, pauses = names.map { pause[$0] ?? 0 }
            try db.execute("""
                UPDATE churnwatch.webhook_endpoints e SET consecutive_failures = e.consecutive_failures + u.n,
                    failing_since = coalesce(e.failing_since, now()),
                    paused_until = CASE WHEN u.pause > 0 THEN greatest(coalesce(e.paused_until, now()), now() + make_interval(secs => u.pause))
                                        ELSE e.paused_until END
                FROM unnest(\(names)::text[], \(counts)::bigint[], \(pauses)::float8[]) AS u(name, n, pause)
                WHERE e.name = u.name
                """)
        }
        if !gone.isEmpty {
            try db.execute("""
                UPDATE churnwatch.webhook_endpoints SET enabled = false,
                    disabled_reason = 'the receiver answered 410 Gone at ' || churnwatch.webhook_time(now()), updated_at = now()
                WHERE name = ANY(\(Array(gone)))
                """)
        }
    }

    private static func settleWinback(_ db: PostgresConnection, _ settlements: [WebhookSettlement]) throws {
        let done = settlements.filter { $0.result == .delivered }.compactMap(\.winbackId)
        let dead = settlements.filter { $0.result == .dead }.compactMap(\.winbackId)
        if !done.isEmpty {
            try db.execute("""
                UPDATE churnwatch.winback_queue SET status = 'done', updated_at = now()
                WHERE id = ANY(\(done)) AND status = 'claimed' AND claimed_by LIKE 'webhook:%'
                """)
        }
        if !dead.isEmpty {
            try db.execute("""
                UPDATE churnwatch.winback_queue SET status = 'pending', claimed_by = NULL, claimed_at = NULL, claim_expires_at = NULL,
                    updated_at = now()
                WHERE id = ANY(\(dead)) AND status = 'claimed' AND claimed_by LIKE 'webhook:%'
                """)
        }
    }

    /// Sends again, to `endpoint`, every message of its app and types written since `since`:
    /// new deliveries where it had none (an endpoint added later gets its history), and those
    /// delivered or dead made pending again (same id, same body). Returns how many.
    public func webhookReplay(_ endpoint: String, since: Date) async throws -> Int {
        try await pool.withTransaction { db in
            guard try db.query("SELECT 1 FROM churnwatch.webhook_endpoints WHERE name = \(endpoint)").count == 1 else {
                throw WebhookError("no endpoint \(endpoint) (`churnwatch webhooks list` shows them)")
            }
            return try db.execute("""
                INSERT INTO churnwatch.webhook_deliveries AS d (endpoint, message_id, seq, original_transaction_id)
                SELECT e.name, m.id, m.seq, m.original_transaction_id
                FROM churnwatch.webhook_endpoints e JOIN churnwatch.webhook_messages m ON m.bundle_id = e.bundle_id
                WHERE e.name = \(endpoint) AND m.seq IS NOT NULL AND m.created_at >= \(since) AND m.endpoint IS NULL
                  AND (cardinality(e.types) = 0 OR m.type = ANY(e.types))
                ON CONFLICT (endpoint, message_id) DO UPDATE SET state = 'pending', attempts = 0, next_attempt_at = now(),
                    lease_until = NULL, leased_by = NULL, last_error = NULL, finished_at = NULL
                WHERE d.state <> 'pending'
                """)
        }
    }

    /// Gives back leases a sender holds and has not attempted: all of them (its stop), or those
    /// of `messageIds` for `endpoint` (an endpoint that asked to wait).
    public func webhookRelease(sender: String, endpoint: String? = nil, messageIds: [Int64]? = nil) async throws {
        try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.webhook_deliveries SET lease_until = NULL, leased_by = NULL
                WHERE leased_by = \(sender) AND state = 'pending'
                  AND (\(endpoint)::text IS NULL OR (endpoint = \(endpoint)::text AND message_id = ANY(\(messageIds ?? [])::bigint[])))
                """)
        }
    }
}
