import Foundation
import Postgres

/// What `prune` removed, or with `dryRun` would remove, table by table.
public struct PruneReport: Sendable, Equatable {
    /// Rows per table (`run_workers` beside `run_items`), in the order pruned.
    public var rows: [(table: String, rows: Int)] = []
    /// The longest single statement: no lock prune takes is held longer.
    public var longestStatement: Duration = .zero
    /// Statements run.
    public var statements = 0
    /// Stopped on request before every table was done (the next prune goes on from there).
    public var stopped = false

    public var total: Int { rows.reduce(0) { $0 + $1.rows } }

    public static func == (a: PruneReport, b: PruneReport) -> Bool {
        a.rows.elementsEqual(b.rows) { $0 == $1 } && a.longestStatement == b.longestStatement
            && a.statements == b.statements && a.stopped == b.stopped
    }
}

extension ChurnStore {
    /// Deletes what `policy` no longer keeps (docs/contracts.md, "Retention"), in statements of at
    /// most `batch` rows, each its own transaction: a run, a sync, `--join` workers and consumers
    /// work beside it and never wait long on it. Ages by `asOf` (the run's moment) what is dated
    /// by a run or by Apple, by `now` (the wall clock) what only knows when it was written.
    /// Rows of unfinished runs are never touched. Idempotent: an interrupted prune is resumed by
    /// running it again. With `dryRun`, counts instead (read only).
    public func prune(_ policy: RetentionPolicy, asOf: Date, now: Date, dryRun: Bool, batch: Int = 5_000,
                      shouldStop: @Sendable () -> Bool = { false }) async throws -> PruneReport {
        var report = PruneReport()
        let cut = { (t: RetentionPolicy.Table) in asOf.addingTimeInterval(-policy[t]) }
        let wallCut = { (t: RetentionPolicy.Table) in now.addingTimeInterval(-policy[t]) }
        try await pruneRunItems(before: cut(.runItems), dryRun: dryRun, batch: batch, shouldStop: shouldStop, into: &report)
        let keyed: [(String, String, PostgresQuery)] = [
            ("notifications", "id", """
                CASE WHEN t.signed_date IS NULL THEN t.received_at < \(wallCut(.notifications))
                     ELSE t.signed_date < \(cut(.notifications)) END
                """),
            ("notification_inbox", "id", "t.processed_at < \(wallCut(.inbox))"),
            ("quarantine", "id", "t.received_at < \(wallCut(.quarantine))"),
            ("segment_changes", "id", "t.changed_at < \(cut(.segmentChanges))"),
            ("transactions", "transaction_id", """
                t.expires_date < \(cut(.transactions)) AND NOT EXISTS (SELECT 1 FROM churnwatch.subscriptions s
                    WHERE s.original_transaction_id = t.original_transaction_id AND s.latest_transaction_id = t.transaction_id)
                """),
        ]
        for (table, key, old) in keyed {
            if report.stopped || shouldStop() {
                report.stopped = true
                break
            }
            let n = try await pruneKeyed(table, key: key, old: old, dryRun: dryRun, batch: batch, shouldStop: shouldStop, into: &report)
            report.rows.append((table, n))
        }
        return report
    }

    /// Items and worker rows of runs that finished before `before` (by their as-of), run by run;
    /// the newest finished run of each kind keeps its own.
    private func pruneRunItems(before: Date, dryRun: Bool, batch: Int, shouldStop: @Sendable () -> Bool,
                               into report: inout PruneReport) async throws {
        let runs = try await pool.withConnection { db in
            try db.query("""
                SELECT r.id FROM churnwatch.runs r
                WHERE r.finished_at IS NOT NULL AND r.as_of < \(before)
                  AND r.id < (SELECT max(n.id) FROM churnwatch.runs n WHERE n.kind = r.kind AND n.finished_at IS NOT NULL)
                  AND (EXISTS (SELECT 1 FROM churnwatch.run_items i WHERE i.run_id = r.id)
                       OR EXISTS (SELECT 1 FROM churnwatch.run_workers w WHERE w.run_id = r.id))
                ORDER BY r.id
                """).map { try $0.decode(Int64.self, "id") }
        }
        var items = 0, workers = 0
        for run in runs {
            if shouldStop() {
                report.stopped = true
                break
            }
            if dryRun {
                let (i, w) = try await timed(&report) { db in
                    (try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(run)")[0].decode(Int.self, at: 0),
                     try db.query("SELECT count(*) FROM churnwatch.run_workers WHERE run_id = \(run)")[0].decode(Int.self, at: 0))
                }
                items += i
                workers += w
                continue
            }
            while true {
                let n = try await timed(&report) { db in
                    try db.execute("""
                        DELETE FROM churnwatch.run_items i USING (
                            SELECT original_transaction_id FROM churnwatch.run_items WHERE run_id = \(run)
                            ORDER BY original_transaction_id LIMIT \(batch)) AS gone
                        WHERE i.run_id = \(run) AND i.original_transaction_id = gone.original_transaction_id
                        """)
                }
                items += n
                if n < batch || shouldStop() { break }
            }
            workers += try await timed(&report) { db in try db.execute("DELETE FROM churnwatch.run_workers WHERE run_id = \(run)") }
        }
        report.rows.append(("run_items", items))
        report.rows.append(("run_workers", workers))
    }

    /// Rows of `table` for which `old` holds (`t` is the row), walked in the order of its key
    /// (`id`, or `transaction_id` for transactions) a batch at a time: each statement reads at
    /// most `batch` rows through the primary key, whatever the table's size.
    private func pruneKeyed(_ table: String, key: String, old: PostgresQuery, dryRun: Bool, batch: Int,
                            shouldStop: @Sendable () -> Bool, into report: inout PruneReport) async throws -> Int {
        if dryRun {
            return try await timed(&report) { db in
                try db.query("SELECT count(*) FROM churnwatch.\(identifier: table) t WHERE \(old)")[0].decode(Int.self, at: 0)
            }
        }
        var afterId: Int64 = 0, afterText = "", removed = 0
        while !shouldStop() {
            let chunk: PostgresQuery = key == "id"
                ? "SELECT id AS key FROM churnwatch.\(identifier: table) WHERE id > \(afterId) ORDER BY id LIMIT \(batch)"
                : "SELECT \(identifier: key) AS key FROM churnwatch.\(identifier: table) WHERE \(identifier: key) > \(afterText) ORDER BY \(identifier: key) LIMIT \(batch)"
            let (last, n) = try await timed(&report) { db in
                let row = try db.query("""
                    WITH chunk AS (\(chunk)), gone AS (
                        DELETE FROM churnwatch.\(identifier: table) t USING chunk WHERE t.\(identifier: key) = chunk.key AND \(old) RETURNING 1
                    )
                    SELECT (SELECT max(key)::text FROM chunk) AS last, (SELECT count(*) FROM gone) AS n
                    """)[0]
                return (try row.decode(String?.self, "last"), try row.decode(Int.self, "n"))
            }
            removed += n
            guard let last else { return removed }
            if key == "id" { afterId = Int64(last) ?? Int64.max } else { afterText = last }
        }
        report.stopped = true
        return removed
    }

    /// One statement on its own connection and transaction, its duration kept in `report`.
    private func timed<T: Sendable>(_ report: inout PruneReport, _ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        let start = ContinuousClock.now
        let value = try await pool.withTransaction(body)
        report.longestStatement = max(report.longestStatement, ContinuousClock.now - start)
        report.statements += 1
        return value
    }
}
