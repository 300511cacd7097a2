import Foundation
import Postgres

/// What the shared budget granted.
public struct BudgetGrant: Sendable, Equatable {
    /// Tokens granted now (each is one request).
    public var granted: Int
    /// When none were granted: how long until one is available.
    public var retryAfter: TimeInterval
    /// A stored pause past the cap that this take dropped (when it ended), for a warning.
    public var droppedPause: Date?

    public init(granted: Int, retryAfter: TimeInterval, droppedPause: Date? = nil) {
        self.granted = granted
        self.retryAfter = retryAfter
        self.droppedPause = droppedPause
    }
}

extension ChurnStore {
    /// Takes up to `want` tokens from the shared bucket `key` (created full on first use; its
    /// rate and burst follow the caller's configuration). Every process working a run draws
    /// from the same row, so their calls together never exceed `rate` (plus `burst` once).
    ///
    /// A stored pause ending more than `maxPause` seconds from now (a far-future `Retry-After`
    /// stored by an older version, or by a process with a longer cap) is dropped, never obeyed:
    /// no stored pause outlives the cap. `dropped` says so, for a warning.
    public func apiBudgetTake(key: String, rate: Double, burst: Double, want: Int,
                              maxPause: TimeInterval = .infinity) async throws -> BudgetGrant {
        let cap = maxPause.isFinite ? max(0, maxPause) : 1e9
        return try await pool.withConnection { db in
            // A data-modifying CTE's rows are invisible to the rest of its statement, so the
            // bucket is created (or its settings updated) first, then drawn from.
            try db.execute("""
                INSERT INTO churnwatch.api_budget (key, rate, burst, tokens)
                VALUES (\(key), \(rate), \(burst), \(burst))
                ON CONFLICT (key) DO UPDATE SET rate = excluded.rate, burst = excluded.burst
                WHERE churnwatch.api_budget.rate <> excluded.rate OR churnwatch.api_budget.burst <> excluded.burst
                """)
            guard let row = try db.query("""
                WITH cur AS (
                    SELECT key, rate, paused_until AS stored_pause,
                           CASE WHEN paused_until > clock_timestamp() + make_interval(secs => \(cap)) THEN NULL
                                ELSE paused_until END AS paused_until,
                           least(burst, tokens + rate * greatest(0, extract(epoch FROM clock_timestamp() - updated_at))) AS avail
                    FROM churnwatch.api_budget WHERE key = \(key)
                    FOR UPDATE
                ), g AS (
                    SELECT key, rate, avail, paused_until, stored_pause,
                           CASE WHEN paused_until > clock_timestamp() THEN 0
                                ELSE least(\(want), floor(avail))::int END AS granted,
                           CASE WHEN paused_until > clock_timestamp() THEN extract(epoch FROM paused_until - clock_timestamp())
                                ELSE 0 END AS paused_for
                    FROM cur
                )
                UPDATE churnwatch.api_budget b SET tokens = g.avail - g.granted, updated_at = clock_timestamp(),
                    paused_until = g.paused_until
                FROM g WHERE b.key = g.key
                RETURNING g.granted, g.avail::float8 AS avail, g.rate, g.paused_for::float8 AS paused_for,
                          g.stored_pause IS DISTINCT FROM g.paused_until AS dropped, g.stored_pause
                """).first else {
                return BudgetGrant(granted: 0, retryAfter: 0.05)
            }
            let dropped = try row.decode(Bool.self, "dropped") ? try row.decode(Date?.self, "stored_pause") : nil
            let granted = try row.decode(Int.self, "granted")
            if granted > 0 { return BudgetGrant(granted: granted, retryAfter: 0, droppedPause: dropped) }
            let paused = try row.decode(Double.self, "paused_for")
            let avail = try row.decode(Double.self, "avail")
            let r = try row.decode(Double.self, "rate")
            return BudgetGrant(granted: 0, retryAfter: max(paused, (1 - avail) / max(r, 0.001)), droppedPause: dropped)
        }
    }

    /// A 429 from Apple: no process takes tokens for `key` before `until` (at most `maxPause`
    /// seconds from now, whatever `until` says).
    public func apiBudgetPause(key: String, until: Date, maxPause: TimeInterval = .infinity) async throws {
        let cap = maxPause.isFinite ? max(0, maxPause) : 1e9
        try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.api_budget SET paused_until = least(greatest(coalesce(paused_until, \(until)), \(until)),
                                                                     clock_timestamp() + make_interval(secs => \(cap))), tokens = 0,
                    updated_at = clock_timestamp()
                WHERE key = \(key)
                """)
        }
    }
}
