import Foundation
import Postgres

/// Who is alive, as PostgreSQL sees it.
///
/// Every process working a run holds a session advisory lock named after its worker name for as
/// long as it lives (`workerLockKey`), on a connection of its own; the owner of a run also holds
/// the run lock of its kind (`runLockKey`). PostgreSQL drops both the moment the process's
/// connection goes away (kill -9, crash, host loss), so "is this worker alive?" is a question
/// to `pg_locks`, answered at once, instead of waiting for a lease or a heartbeat to age.
extension ChurnStore {
    /// The advisory lock the owner of a run of `kind` holds (one nightly run and one backfill at
    /// a time, per app).
    public func runLockKey(_ kind: RunRecord.Kind) -> Int64 {
        PostgresAdvisoryLockKey.named("churnwatch.run.\(kind.rawValue).\(app)")
    }

    /// The advisory lock a sync of the change feed holds (one sync at a time per app: `run`'s,
    /// or `notifications sync`'s).
    public var feedLockKey: Int64 { PostgresAdvisoryLockKey.named("churnwatch.feed.\(app)") }

    /// The advisory lock `churnwatch serve`'s applier holds while it applies this app's inbox:
    /// of several serve processes, one applies an app's rows at a time. (A sync applying the
    /// inbox beside it is safe: a notification is recorded once by its UUID, and a subscription
    /// changed under a commit is decided again.)
    public var inboxLockKey: Int64 { PostgresAdvisoryLockKey.named("churnwatch.inbox.\(app)") }

    /// The advisory lock a worker process holds while it lives.
    public static func workerLockKey(_ worker: String) -> Int64 {
        PostgresAdvisoryLockKey.named("churnwatch.worker.\(worker)")
    }

    /// True while some session of this database holds the run lock of `kind`: a process owns
    /// such a run right now.
    public func runLockHeld(_ kind: RunRecord.Kind) async throws -> Bool {
        let key = runLockKey(kind)
        return try await pool.withConnection { db in
            try !Self.heldAdvisoryLocks(db, [key]).isEmpty
        }
    }

    /// Of `keys`, those some session of this database holds as a session-level bigint advisory
    /// lock. (`pg_locks` shows a bigint key as its high half in `classid`, its low half in
    /// `objid`, with `objsubid` 1.)
    static func heldAdvisoryLocks(_ db: PostgresConnection, _ keys: [Int64]) throws -> Set<Int64> {
        guard !keys.isEmpty else { return [] }
        return Set(try db.query("""
            SELECT k FROM unnest(\(keys)::int8[]) AS k
            WHERE EXISTS (
                SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                  AND ((l.classid::int8 << 32) | l.objid::int8) = k)
            """).map { try $0.decode(Int64.self, at: 0) })
    }

    /// Items claimed by workers that are gone (their worker lock is free: the process died or
    /// lost its database connection) go back to pending at once, without waiting for their
    /// lease. Returns how many were given back.
    @discardableResult
    public func runItemsRecoverDead(runId: Int64) async throws -> Int {
        try await pool.withConnection { db in
            let workers = try db.query("""
                SELECT DISTINCT claimed_by FROM churnwatch.run_items
                WHERE run_id = \(runId) AND status = 'claimed' AND claimed_by IS NOT NULL
                """).map { try $0.decode(String.self, at: 0) }
            guard !workers.isEmpty else { return 0 }
            let alive = try Self.heldAdvisoryLocks(db, workers.map(Self.workerLockKey))
            let dead = workers.filter { !alive.contains(Self.workerLockKey($0)) }
            guard !dead.isEmpty else { return 0 }
            return try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', claimed_by = NULL, lease_until = NULL
                WHERE run_id = \(runId) AND status = 'claimed' AND claimed_by = ANY(\(dead))
                """)
        }
    }

    /// Items `worker` claimed at least `olderThan` seconds ago and no longer works on (`keep`
    /// are the ones in flight): a claim that committed while its answer was lost with the
    /// connection. They go back to pending. `lease` is the lease the claims were taken with.
    @discardableResult
    public func runItemsReleaseOrphans(runId: Int64, worker: String, keep: [String], lease: TimeInterval,
                                       olderThan: TimeInterval) async throws -> Int {
        let claimedBefore = lease - olderThan
        return try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', claimed_by = NULL, lease_until = NULL
                WHERE run_id = \(runId) AND status = 'claimed' AND claimed_by = \(worker)
                  AND lease_until < clock_timestamp() + make_interval(secs => \(claimedBefore))
                  AND NOT (original_transaction_id = ANY(\(keep)))
                """)
        }
    }

    /// Gives back every item `worker` still holds (a stop whose grace ran out).
    @discardableResult
    public func runItemsReleaseAll(runId: Int64, worker: String) async throws -> Int {
        try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', claimed_by = NULL, lease_until = NULL,
                    attempts = greatest(attempts - 1, 0)
                WHERE run_id = \(runId) AND status = 'claimed' AND claimed_by = \(worker)
                """)
        }
    }
}
