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
    /// The rate the bucket gives out now (below the configured one after a server's 429s).
    public var rate: Double?

    public init(granted: Int, retryAfter: TimeInterval, droppedPause: Date? = nil, rate: Double? = nil) {
        self.granted = granted
        self.retryAfter = retryAfter
        self.droppedPause = droppedPause
        self.rate = rate
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
                              maxPause: TimeInterval = .infinity, adaptation: BudgetAdaptation = .init()) async throws -> BudgetGrant {
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
                WITH adapted AS (
                    SELECT key, burst, tokens, updated_at, paused_until, \(Self.effectiveRate(adaptation)) AS rate
                    FROM churnwatch.api_budget WHERE key = \(key)
                    FOR UPDATE
                ), cur AS (
                    SELECT key, rate, paused_until AS stored_pause,
                           CASE WHEN paused_until > clock_timestamp() + make_interval(secs => \(cap)) THEN NULL
                                ELSE paused_until END AS paused_until,
                           least(greatest(1, burst * rate / \(rate)),
                                 tokens + rate * greatest(0, extract(epoch FROM clock_timestamp() - updated_at))) AS avail
                    FROM adapted
                ), g AS (
                    SELECT key, rate, avail, paused_until, stored_pause,
                           CASE WHEN paused_until > clock_timestamp() THEN 0
                                ELSE least(\(want), floor(avail))::int END AS granted,
                           CASE WHEN paused_until > clock_timestamp() THEN extract(epoch FROM paused_until - clock_timestamp())
                                ELSE 0 END AS paused_for
                    FROM cur
                )
                UPDATE churnwatch.api_budget b SET
                    -- Paused: nothing accrues before the pause ends (no burst of refusals after it).
                    tokens = CASE WHEN g.paused_for > 0 THEN 0 ELSE g.avail - g.granted END,
                    updated_at = CASE WHEN g.paused_for > 0 THEN g.paused_until ELSE clock_timestamp() END,
                    paused_until = g.paused_until, window_granted = b.window_granted + g.granted
                FROM g WHERE b.key = g.key
                RETURNING g.granted, g.avail::float8 AS avail, g.rate, g.paused_for::float8 AS paused_for,
                          g.stored_pause IS DISTINCT FROM g.paused_until AS dropped, g.stored_pause
                """).first else {
                return BudgetGrant(granted: 0, retryAfter: 0.05)
            }
            let dropped = try row.decode(Bool.self, "dropped") ? try row.decode(Date?.self, "stored_pause") : nil
            let granted = try row.decode(Int.self, "granted")
            let r = try row.decode(Double.self, "rate")
            if granted > 0 { return BudgetGrant(granted: granted, retryAfter: 0, droppedPause: dropped, rate: r) }
            let paused = try row.decode(Double.self, "paused_for")
            let avail = try row.decode(Double.self, "avail")
            return BudgetGrant(granted: 0, retryAfter: max(paused, (1 - avail) / max(r, 0.001)), droppedPause: dropped, rate: r)
        }
    }

    /// A 429 from Apple: no process takes tokens for `key` before `until` (at most `maxPause`
    /// seconds from now, whatever `until` says). A refused call sent after the last cut counts;
    /// when that cut is `hold` old, the rate is cut again: to the share of the calls granted
    /// since the last cut that the server took (with fewer than `sample` of them, × `decrease`),
    /// at most × `decrease`, at least × `deepest`. Returns the rate allowed now (nil: configured).
    @discardableResult
    public func apiBudgetPause(key: String, until: Date, sentAt: Date = .distantFuture, maxPause: TimeInterval = .infinity,
                               adaptation a: BudgetAdaptation = .init()) async throws -> Double? {
        let cap = maxPause.isFinite ? max(0, maxPause) : 1e9
        let pausedUntil: PostgresQuery = """
            least(greatest(coalesce(b.paused_until, \(until)), \(until)), clock_timestamp() + make_interval(secs => \(cap)))
            """
        return try await pool.withConnection { db in
            try db.query("""
                WITH w AS (
                    SELECT key, rate AS configured, \(Self.effectiveRate(a)) AS rate, window_granted,
                           window_refused + CASE WHEN allowed_at IS NULL OR allowed_at <= \(sentAt) THEN 1 ELSE 0 END AS refused,
                           (allowed_at IS NULL OR (allowed_at <= \(sentAt)
                                                   AND allowed_at < clock_timestamp()
                                                       - make_interval(secs => greatest(\(a.hold), \(a.intervals) / allowed_rate)))) AS due
                    FROM churnwatch.api_budget WHERE key = \(key) FOR UPDATE
                ), c AS (
                    SELECT w.*, greatest(configured * \(a.floor), rate * CASE WHEN window_granted < \(a.sample) THEN \(a.decrease)
                        ELSE greatest(\(a.deepest), least(\(a.decrease), 1 - refused / window_granted)) END) AS cut
                    FROM w
                )
                UPDATE churnwatch.api_budget b SET paused_until = \(pausedUntil), tokens = 0,
                    updated_at = greatest(clock_timestamp(), \(pausedUntil)),
                    allowed_rate = CASE WHEN c.due THEN c.cut ELSE b.allowed_rate END,
                    allowed_ceiling = CASE WHEN c.due THEN c.rate ELSE b.allowed_ceiling END,
                    allowed_at = CASE WHEN c.due THEN clock_timestamp() ELSE b.allowed_at END,
                    window_granted = CASE WHEN c.due THEN 0 ELSE b.window_granted END,
                    window_refused = CASE WHEN c.due THEN 0 ELSE c.refused END
                FROM c WHERE b.key = c.key
                RETURNING b.allowed_rate
                """).first?.decode(Double?.self, "allowed_rate")
        }
    }

    /// The rate the shared bucket of a row gives out now: the configured `rate`, or the rate a
    /// 429 cut it to, climbing back since the cut: by `fastClimb` of itself a second up to
    /// `resume` × the rate that was refused (a cut deeper than needed costs seconds, not
    /// minutes), then by `climb` of itself a second, up to the configured rate.
    static func effectiveRate(_ a: BudgetAdaptation) -> PostgresQuery {
        let t: PostgresQuery = "greatest(0, extract(epoch FROM clock_timestamp() - allowed_at))"
        let target: PostgresQuery = "(coalesce(allowed_ceiling, allowed_rate) * \(a.resume))"
        return """
        CASE WHEN allowed_rate IS NULL THEN rate
             WHEN allowed_rate * (1 + \(a.fastClimb) * \(t)) < \(target) THEN least(rate, allowed_rate * (1 + \(a.fastClimb) * \(t)))
             ELSE least(rate, greatest(allowed_rate, \(target))
                 * (1 + \(a.climb) * greatest(0, \(t) - greatest(0, (\(target) / allowed_rate - 1) / \(a.fastClimb)))))
        END
        """
    }
}

/// How the shared rate follows a server that allows less than configured (each number is a
/// fraction of the rate, or seconds): see ``ChurnStore/apiBudgetPause(key:until:sentAt:maxPause:adaptation:)``.
/// The rate never goes below `floor` × the configured rate, and climbs back by `climb` of itself
/// per second. With the defaults, a run against a server that takes 20/s while 50/s is
/// configured settles just under 20/s (ops/bench run, rate_adapt_utilization).
public struct BudgetAdaptation: Sendable, Equatable {
    public var decrease = 0.85
    public var deepest = 0.05
    public var sample = 10.0
    public var hold: TimeInterval = 0.01
    /// A cut is judged again only after this many calls' spacing at the rate it set (the server
    /// has seen the new rate by then).
    public var intervals = 2.0
    public var fastClimb = 0.25
    public var resume = 0.95
    public var climb = 0.01
    public var floor = 1.0 / 256

    public init() {}
}
