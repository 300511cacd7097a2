import ChurnModel
import Foundation
import Postgres

/// What `prune` removed, or with `dryRun` would remove, table by table.
public struct PruneReport: Sendable {
    /// Rows per table (`run_workers` beside `run_items`), in the order pruned.
    public var rows: [(table: String, rows: Int)] = []
    /// The longest single statement: no lock prune takes is held longer.
    public var longestStatement: Duration = .zero
    /// Statements run.
    public var statements = 0
    /// Stopped on request before every table was done (the next prune goes on from there).
    public var stopped = false

    public var total: Int { rows.reduce(0) { $0 + $1.rows } }
}

extension DatabaseStore {
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
        // Observations kept for late notifications (ObservationSequence.horizon after their
        // successor). The cut is recorded before any row goes: a late notification placed
        // meanwhile knows a missing predecessor may have been pruned.
        let observationsCut = asOf.addingTimeInterval(-ObservationSequence.horizon)
        if !dryRun { try await observationsCutRecord(observationsCut) }
        // Each: the table, the rows that aged (found through an index on the age, in its order),
        // and what keeps a row although it aged.
        let aged: [(String, PostgresQuery, PostgresQuery)] = [
            ("notifications", "t.signed_date < \(cut(.notifications)) ORDER BY t.signed_date", "false"),
            ("notifications", "t.signed_date IS NULL AND t.received_at < \(wallCut(.notifications)) ORDER BY t.received_at", "false"),
            ("notification_inbox", "t.processed_at < \(wallCut(.inbox))", "false"),
            ("quarantine", "t.received_at < \(wallCut(.quarantine))", "false"),
            ("segment_changes", "t.changed_at < \(cut(.segmentChanges)) ORDER BY t.changed_at", "false"),
            ("retention_message_requests", "t.signed_at < \(cut(.retentionRequests)) ORDER BY t.signed_at", "false"),
            ("webhook_messages", "t.created_at < \(wallCut(.webhookMessages)) ORDER BY t.created_at", """
                EXISTS (SELECT 1 FROM churnwatch.webhook_deliveries d WHERE d.message_id = t.id AND d.state = 'pending')
                """),
            ("transactions", "t.expires_date < \(cut(.transactions)) ORDER BY t.expires_date", """
                EXISTS (SELECT 1 FROM churnwatch.subscriptions s
                        WHERE s.original_transaction_id = t.original_transaction_id AND s.latest_transaction_id = t.transaction_id)
                """),
        ]
        var counts: [(String, Int)] = []
        for (table, old, unless) in aged {
            if report.stopped || shouldStop() {
                report.stopped = true
                break
            }
            let n = try await pruneAged(table, old: old, keep: unless, dryRun: dryRun, batch: batch, shouldStop: shouldStop, into: &report)
            if let i = counts.firstIndex(where: { $0.0 == table }) { counts[i].1 += n } else { counts.append((table, n)) }
        }
        report.rows += counts
        if !report.stopped {
            report.rows.append(("observations", try await pruneObservations(before: observationsCut, dryRun: dryRun, batch: batch,
                                                                           shouldStop: shouldStop, into: &report)))
        }
        return report
    }

    /// Observations whose successor was signed before `before`, a batch at a time (keyed by
    /// subscription and moment: the table has no id).
    private func pruneObservations(before: Date, dryRun: Bool, batch: Int, shouldStop: @Sendable () -> Bool,
                                   into report: inout PruneReport) async throws -> Int {
        if dryRun {
            return try await timed(&report) { db in
                try db.query("SELECT count(*) FROM churnwatch.observations WHERE next_signed_date < \(before)")[0].decode(Int.self, at: 0)
            }
        }
        var removed = 0, done = false
        while !done, !shouldStop() {
            let n = try await timed(&report) { db in
                try db.execute("""
                    DELETE FROM churnwatch.observations o USING (
                        SELECT original_transaction_id, signed_date FROM churnwatch.observations
                        WHERE next_signed_date < \(before) ORDER BY next_signed_date LIMIT \(batch)) AS gone
                    WHERE o.original_transaction_id = gone.original_transaction_id AND o.signed_date = gone.signed_date
                    """)
            }
            removed += n
            done = n < batch
        }
        report.stopped = !done
        // The table is replaced every week: vacuumed now (outside a transaction), its pages are
        // reused by the next rows at once instead of growing the table. VACUUM takes no lock a
        // writer waits on, so it is not a statement `longestStatement` bounds.
        if removed > 0 {
            _ = try await pool.withConnection { db in try db.execute("VACUUM churnwatch.observations") }
            report.statements += 1
        }
        return removed
    }

    /// Every app's prune cut of the observations moves up to `cut` (never back).
    private func observationsCutRecord(_ cut: Date) async throws {
        _ = try await pool.withConnection { db in
            try db.execute("""
                UPDATE churnwatch.apps SET observations_pruned_before = \(cut)
                WHERE observations_pruned_before IS NULL OR observations_pruned_before < \(cut)
                """)
        }
    }

    /// Items and worker rows of runs that finished before `before` (by their as-of), run by run;
    /// the newest finished run of each kind keeps its own.
    private func pruneRunItems(before: Date, dryRun: Bool, batch: Int, shouldStop: @Sendable () -> Bool,
                               into report: inout PruneReport) async throws {
        let runs = try await pool.withConnection { db in
            try db.query("""
                SELECT r.id FROM churnwatch.runs r
                WHERE r.finished_at IS NOT NULL AND r.as_of < \(before)
                  AND r.id < (SELECT max(n.id) FROM churnwatch.runs n
                                WHERE n.kind = r.kind AND n.bundle_id = r.bundle_id AND n.finished_at IS NOT NULL)
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

    /// Rows of `table` that aged (`old`: the condition and its order, `t` is the row) unless `keep`
    /// holds, a batch at a time. Each statement finds its rows through the index on the age and
    /// skips those kept by walking on from the last one it looked at, so a prune reads what aged
    /// once, and one with nothing to remove costs an index probe.
    private func pruneAged(_ table: String, old: PostgresQuery, keep: PostgresQuery, dryRun: Bool, batch: Int,
                           shouldStop: @Sendable () -> Bool, into report: inout PruneReport) async throws -> Int {
        let key: PostgresQuery = switch table {
        case "transactions": "transaction_id"
        case "retention_message_requests": "request_identifier"
        default: "id"
        }
        if dryRun {
            return try await timed(&report) { db in
                try db.query("""
                    SELECT count(*) FROM (SELECT t.\(key) FROM churnwatch.\(identifier: table) t WHERE \(old)) AS a
                    JOIN churnwatch.\(identifier: table) t USING (\(key)) WHERE NOT (\(keep))
                    """)[0].decode(Int.self, at: 0)
            }
        }
        var removed = 0, skip = 0
        while !shouldStop() {
            let offset = skip
            let (looked, n) = try await timed(&report) { db in
                let row = try db.query("""
                    WITH chunk AS (SELECT t.\(key) AS key FROM churnwatch.\(identifier: table) t WHERE \(old) OFFSET \(offset) LIMIT \(batch)),
                    gone AS (
                        DELETE FROM churnwatch.\(identifier: table) t USING chunk WHERE t.\(key) = chunk.key AND NOT (\(keep)) RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM chunk) AS looked, (SELECT count(*) FROM gone) AS n
                    """)[0]
                return (try row.decode(Int.self, "looked"), try row.decode(Int.self, "n"))
            }
            removed += n
            skip += looked - n
            if looked < batch { return removed }
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
