import ChurnModel
import Foundation
import Postgres
import Synchronization

/// A row of `churnwatch.runs`.
public struct RunRecord: Sendable, Equatable {
    public enum Kind: String, Sendable, Codable { case nightly, backfill }
    public enum Status: String, Sendable, Codable { case planning, running, interrupted, done, failed }

    public var id: Int64
    public var kind: Kind
    public var asOf: Date
    public var status: Status
    public var startedAt: Date
    public var finishedAt: Date?
    public var due: Int
    public var params: StoredJSON
}

/// Progress of a run, from its items.
public struct RunProgress: Sendable, Equatable {
    public var pending = 0
    public var claimed = 0
    public var done = 0
    public var failed = 0
    public var total: Int { pending + claimed + done + failed }
    public var finished: Bool { pending == 0 && claimed == 0 }
}

extension ChurnStore {
    static let runColumns: PostgresQuery = "id, kind, as_of, status, started_at, finished_at, due, params"

    static func decodeRun(_ row: PostgresRow) throws -> RunRecord {
        RunRecord(
            id: try row.decode(Int64.self, "id"),
            kind: RunRecord.Kind(rawValue: try row.decode(String.self, "kind")) ?? .nightly,
            asOf: try row.decode(Date.self, "as_of"),
            status: RunRecord.Status(rawValue: try row.decode(String.self, "status")) ?? .running,
            startedAt: try row.decode(Date.self, "started_at"),
            finishedAt: try row.decode(Date?.self, "finished_at"),
            due: try row.decode(Int.self, "due"),
            params: try row.decode(StoredJSON.self, "params"))
    }

    /// The newest unfinished run of a kind, if any (interrupted and crashed runs included).
    public func runFindUnfinished(kind: RunRecord.Kind) async throws -> RunRecord? {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.runColumns) FROM churnwatch.runs
                WHERE bundle_id = \(app) AND kind = \(kind.rawValue) AND finished_at IS NULL
                ORDER BY id DESC LIMIT 1
                """).first.map(Self.decodeRun)
        }
    }

    /// Every unfinished run of a kind, oldest night first (by as-of time, then id): the order
    /// the nightly owner and `--join` helpers work them in.
    public func runFindUnfinishedAll(kind: RunRecord.Kind) async throws -> [RunRecord] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.runColumns) FROM churnwatch.runs
                WHERE bundle_id = \(app) AND kind = \(kind.rawValue) AND finished_at IS NULL
                ORDER BY as_of, id
                """).map(Self.decodeRun)
        }
    }

    /// The newest finished run of `kind` whose as-of lies in `range` (a night), if any.
    public func runFindFinished(kind: RunRecord.Kind, asOfIn range: Range<Date>) async throws -> RunRecord? {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.runColumns) FROM churnwatch.runs
                WHERE bundle_id = \(app) AND kind = \(kind.rawValue) AND finished_at IS NOT NULL
                  AND as_of >= \(range.lowerBound) AND as_of < \(range.upperBound)
                ORDER BY as_of DESC, id DESC LIMIT 1
                """).map(Self.decodeRun).first
        }
    }

    /// Marks a freshly planned run as waiting (`planning`) while its process first finishes an
    /// earlier night's run; `runResume` sets it running when its turn comes.
    public func runMarkWaiting(_ id: Int64) async throws {
        try await pool.withConnection { db in
            try db.execute("UPDATE churnwatch.runs SET status = 'planning' WHERE id = \(id) AND finished_at IS NULL")
        }
    }

    /// Items of a run that failed only because Apple rate limited them.
    public func runItemsRateLimitedCount(_ runId: Int64) async throws -> Int {
        try await pool.withConnection { db in
            try db.query("""
                SELECT count(*) FROM churnwatch.run_items
                WHERE run_id = \(runId) AND status = 'failed' AND failure_class = \(ItemFailureClass.rateLimited.rawValue)
                """)[0].decode(Int.self, at: 0)
        }
    }

    /// Puts a run's items that failed only because Apple rate limited them back to pending, to
    /// be polled again within the run. Returns how many.
    @discardableResult
    public func runItemsRetryRateLimited(_ runId: Int64) async throws -> Int {
        try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', outcome = NULL, failure_class = NULL, finished_at = NULL,
                    claimed_by = NULL, lease_until = NULL
                WHERE run_id = \(runId) AND status = 'failed' AND failure_class = \(ItemFailureClass.rateLimited.rawValue)
                """)
        }
    }

    /// Creates a nightly run and plans its items in one transaction: one `INSERT ... SELECT`
    /// of the due selection (a subscription due for several reasons gets the first). A crash
    /// before COMMIT leaves nothing behind. Returns the run and its counts by reason.
    ///
    /// `behind`: unfinished runs of earlier nights that the same process works first. Their
    /// open items (pending or claimed) are left out: they are polled there, tonight, before
    /// this run, and polling them twice would double the cost of catching up.
    public func runCreateNightly(asOf: Date, windows: PlanWindows, params: StoredJSON,
                                 behind: [Int64] = []) async throws -> (RunRecord, [DueReason: Int]) {
        let due = Self.dueSelection(app: app, asOf: asOf, windows: windows)
        let selection: PostgresQuery = behind.isEmpty ? due : """
            SELECT * FROM (\(due)) AS d
            WHERE NOT EXISTS (SELECT 1 FROM churnwatch.run_items e
                              WHERE e.run_id = ANY(\(behind)) AND e.original_transaction_id = d.original_transaction_id
                                AND e.status IN ('pending', 'claimed'))
            """
        let result = try await pool.withTransaction { db in
            try db.execute(Self.withoutJIT)
            let run = try Self.decodeRun(try db.query("""
                INSERT INTO churnwatch.runs (bundle_id, kind, as_of, status, params)
                VALUES (\(app), 'nightly', \(asOf), 'running', \(params))
                RETURNING \(Self.runColumns)
                """)[0])
            var byReason: [DueReason: Int] = [:]
            for row in try db.query("""
                WITH planned AS (
                    INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, priority)
                    SELECT \(run.id), original_transaction_id, reason, priority FROM (\(selection)) AS due
                    -- In the claim index's order: the table is read in no particular order, and
                    -- index entries inserted in order land on the same few pages.
                    ORDER BY priority, original_transaction_id
                    RETURNING reason
                )
                SELECT reason, count(*) AS n FROM planned GROUP BY reason
                """) {
                if let r = DueReason(rawValue: try row.decode(String.self, "reason")) {
                    byReason[r] = try row.decode(Int.self, "n")
                }
            }
            let due = byReason.values.reduce(0, +)
            let counts = try PostgresJSON(encoding: ["due_by_reason": Dictionary(uniqueKeysWithValues: byReason.map { ($0.key.rawValue, $0.value) })])
            try db.execute("UPDATE churnwatch.runs SET due = \(due), counts = \(counts) WHERE id = \(run.id)")
            var planned = run
            planned.due = due
            return (planned, byReason)
        }
        await refreshStatistics(.runItems)
        return result
    }

    /// Marks a resumed or interrupted run as running again.
    public func runResume(_ id: Int64) async throws {
        try await pool.withConnection { db in
            try db.execute("UPDATE churnwatch.runs SET status = 'running' WHERE id = \(id) AND finished_at IS NULL")
        }
    }

    /// Records that a worker works this run, when it was last seen, and its counters.
    public func runWorkerHeartbeat(runId: Int64, worker: String, stats: StoredJSON = .emptyObject) async throws {
        try await pool.withConnection { db in
            try db.execute("""
                INSERT INTO churnwatch.run_workers (run_id, worker, stats) VALUES (\(runId), \(worker), \(stats))
                ON CONFLICT (run_id, worker) DO UPDATE SET seen_at = now(), stats = excluded.stats
                """)
        }
    }

    /// On resume by the run's owner: items claimed by workers not seen for `silence` go back to
    /// pending, and items that failed for a reason of the whole run, not of the subscription
    /// (Apple unavailable or rate limiting, a rejected key, an untrusted TLS certificate), are
    /// tried again: the operator fixed it, or it went away.
    /// Returns how many items were given back.
    @discardableResult
    public func runItemsRecover(runId: Int64, silence: TimeInterval) async throws -> Int {
        try await pool.withConnection { db in
            let released = try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', claimed_by = NULL, lease_until = NULL
                WHERE run_id = \(runId) AND status = 'claimed'
                  AND claimed_by NOT IN (SELECT worker FROM churnwatch.run_workers
                                         WHERE run_id = \(runId) AND seen_at > clock_timestamp() - make_interval(secs => \(silence)))
                """)
            let retriedClasses = ItemFailureClass.allCases.filter(\.retriedOnResume).map(\.rawValue)
            let retried = try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', outcome = NULL, failure_class = NULL, finished_at = NULL
                WHERE run_id = \(runId) AND status = 'failed' AND failure_class = ANY(\(retriedClasses)::text[])
                """)
            return released + retried
        }
    }

    /// Claims up to `limit` items: pending ones first, then claimed ones whose lease expired (a
    /// crashed worker). `FOR UPDATE SKIP LOCKED` lets any number of workers claim at once, and
    /// each of the two picks is served by its own partial index, so a claim costs the same at
    /// the start and the end of a run. Returns the items with their subscriptions' stored
    /// state, in priority order.
    public func runItemsClaim(runId: Int64, worker: String, limit: Int, lease: TimeInterval) async throws -> [ClaimedItem] {
        let decoder = JSONDecoder()
        let cursors = self.claimCursors
        return try await pool.withConnection { db in
            // Claimed rows leave the pending index only when vacuumed; scanning from where this
            // process last claimed skips them, so a claim costs the same at the end of a run as
            // at the start. Released items lie behind the cursor: when nothing is ahead, the
            // scan starts over once.
            var claimed: [ClaimedItem] = []
            var rows: PostgresRows
            let hadCursor = cursors.get(runId) != nil
            for fromStart in [false, true] {
                if fromStart && !hadCursor { break }
                let cursor = fromStart ? nil : cursors.get(runId)
                let after: PostgresQuery = cursor.map { "AND (priority, original_transaction_id) > (\($0.priority), \($0.id))" } ?? ""
                let pending: PostgresQuery = """
                    SELECT original_transaction_id FROM churnwatch.run_items
                    WHERE run_id = \(runId) AND status = 'pending' \(after)
                    ORDER BY priority, original_transaction_id
                    LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED
                    """
                rows = try db.query(Self.claimStatement(runId: runId, worker: worker, lease: lease, pick: pending))
                for row in rows {
                    claimed.append(try Self.decodeClaimed(row, decoder))
                    cursors.advance(runId, priority: try row.decode(Int16.self, "priority"), id: claimed.last!.originalTransactionId)
                }
                if !claimed.isEmpty { break }
                if !fromStart { cursors.reset(runId) }
            }
            if claimed.count < limit {
                let expired: PostgresQuery = """
                    SELECT original_transaction_id FROM churnwatch.run_items
                    WHERE run_id = \(runId) AND status = 'claimed' AND lease_until < clock_timestamp()
                    ORDER BY lease_until
                    LIMIT \(limit - claimed.count)
                    FOR UPDATE SKIP LOCKED
                    """
                let expiredRows = try db.query(Self.claimStatement(runId: runId, worker: worker, lease: lease, pick: expired))
                claimed += try expiredRows.map { try Self.decodeClaimed($0, decoder) }
            }
            return claimed
        }
    }

    static func claimStatement(runId: Int64, worker: String, lease: TimeInterval, pick: PostgresQuery) -> PostgresQuery {
        // MATERIALIZED: the pick (with its row locks) runs exactly once. Inlined, the planner
        // may put it on the inner side of a nested loop and rescan it for every row.
        """
        WITH pick AS MATERIALIZED (\(pick)),
        claimed AS (
            UPDATE churnwatch.run_items i
            SET status = 'claimed', claimed_by = \(worker), attempts = i.attempts + 1,
                lease_until = clock_timestamp() + make_interval(secs => \(lease))
            FROM pick
            WHERE i.run_id = \(runId) AND i.original_transaction_id = pick.original_transaction_id
            RETURNING i.original_transaction_id, i.reason, i.attempts, i.priority
        )
        SELECT c.original_transaction_id, c.reason, c.attempts, c.priority, s.environment, s.receipt_data,
               s.app_account_token, s.customer_ref, s.snapshot, s.latest_transaction_id, s.history_revision,
               s.established_at, s.state_version, g.segment, g.segment_since,
               (SELECT coalesce(array_agg(w.campaign || ' ' || w.episode), '{}') FROM churnwatch.winback_queue w
                 WHERE w.original_transaction_id = c.original_transaction_id AND w.status IN ('pending', 'claimed')) AS live
        FROM claimed c
        JOIN churnwatch.subscriptions s USING (original_transaction_id)
        LEFT JOIN churnwatch.subscription_segments g USING (original_transaction_id)
        ORDER BY c.priority, c.original_transaction_id
        """
    }

    /// Gives claimed items back (graceful shutdown before they were polled).
    public func runItemsRelease(runId: Int64, worker: String, ids: [String]) async throws {
        guard !ids.isEmpty else { return }
        try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.run_items SET status = 'pending', claimed_by = NULL, lease_until = NULL,
                    attempts = greatest(attempts - 1, 0)
                WHERE run_id = \(runId) AND claimed_by = \(worker) AND status = 'claimed'
                  AND original_transaction_id = ANY(\(ids))
                """)
        }
    }

    public func runProgress(_ runId: Int64) async throws -> RunProgress {
        try await pool.withConnection { db in try Self.runProgress(db, runId: runId) }
    }

    /// Run `runId`'s items by status: the one query of it (the run's progress, its metrics).
    static func runProgress(_ db: PostgresConnection, runId: Int64) throws -> RunProgress {
        var p = RunProgress()
        for row in try db.query("SELECT status, count(*) AS n FROM churnwatch.run_items WHERE run_id = \(runId) GROUP BY status") {
            let n = try row.decode(Int.self, "n")
            switch try row.decode(String.self, "status") {
            case "pending": p.pending = n
            case "claimed": p.claimed = n
            case "done": p.done = n
            case "failed": p.failed = n
            default: break
            }
        }
        return p
    }

    /// Marks a run interrupted (SIGTERM, time budget, Apple down): the next run resumes it.
    public func runInterrupt(_ runId: Int64) async throws {
        try await pool.withConnection { db in
            try db.execute("UPDATE churnwatch.runs SET status = 'interrupted' WHERE id = \(runId) AND finished_at IS NULL")
        }
    }
}

/// Where this process last claimed in each run: (priority, original_transaction_id).
final class ClaimCursors: Sendable {
    struct Position: Sendable { var priority: Int16; var id: String }
    private let positions = Mutex<[Int64: Position]>([:])

    func get(_ run: Int64) -> Position? { positions.withLock { $0[run] } }

    func advance(_ run: Int64, priority: Int16, id: String) {
        positions.withLock { positions in
            if let p = positions[run], (p.priority, p.id) >= (priority, id) { return }
            positions[run] = Position(priority: priority, id: id)
        }
    }

    func reset(_ run: Int64) { positions.withLock { $0[run] = nil } }
}
