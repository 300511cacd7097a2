import ChurnModel
import Foundation
import Postgres

/// How far a run has come, from its row, its items and its workers' heartbeats
/// (`churnwatch status`).
public struct RunStatus: Sendable, Equatable {
    /// One worker process that joined the run: from its first to its last heartbeat.
    public struct Worker: Sendable, Equatable {
        public var name: String
        public var startedAt: Date
        public var seenAt: Date

        public init(name: String, startedAt: Date, seenAt: Date) {
            self.name = name
            self.startedAt = startedAt
            self.seenAt = seenAt
        }
    }

    public var run: RunRecord
    public var items: RunProgress
    /// Failed items by their failure class's label ("not found", ...; ``ItemFailureClass/label``).
    public var failedByReason: [String: Int]
    /// Apple calls by endpoint, summed over the workers' `stats.calls`.
    public var calls: [String: Int]
    /// 429 answers, summed over the workers' `stats.http_429`; nil when no worker reports it.
    public var http429: Int?
    /// Ordered by start.
    public var workers: [Worker]
    /// The moment the figures are measured at (elapsed time and ETA are relative to it).
    public var measuredAt: Date

    public init(run: RunRecord, items: RunProgress, failedByReason: [String: Int], calls: [String: Int],
                http429: Int?, workers: [Worker], measuredAt: Date) {
        self.run = run
        self.items = items
        self.failedByReason = failedByReason
        self.calls = calls
        self.http429 = http429
        self.workers = workers
        self.measuredAt = measuredAt
    }

    public var callsTotal: Int { calls.values.reduce(0, +) }

    /// Items with a final outcome (polled or failed).
    public var finishedItems: Int { items.done + items.failed }

    public var lastSeen: Date? { workers.map(\.seenAt).max() }

    /// Seconds workers were at work: the union of their spans, so the hours between an
    /// interrupted run and its resume don't count. Without workers: from the run's start to
    /// its end (or `measuredAt`).
    public var activeSeconds: TimeInterval {
        if workers.isEmpty {
            return max(0, (run.finishedAt ?? measuredAt).timeIntervalSince(run.startedAt))
        }
        return Self.unionLength(workers.map { ($0.startedAt, max($0.startedAt, $0.seenAt)) })
    }

    /// Apple calls per second over `activeSeconds`; nil before any time passed.
    public var callRate: Double? {
        activeSeconds > 0 ? Double(callsTotal) / activeSeconds : nil
    }

    /// Finished items per second over `activeSeconds`; nil before any time passed.
    public var itemRate: Double? {
        activeSeconds > 0 ? Double(finishedItems) / activeSeconds : nil
    }

    /// Seconds until the pending and claimed items are finished at `itemRate`: 0 when nothing
    /// is left, nil when there is no rate yet.
    public var eta: TimeInterval? {
        let left = items.pending + items.claimed
        if left == 0 { return 0 }
        guard let rate = itemRate, rate > 0 else { return nil }
        return Double(left) / rate
    }

    /// The total length covered by closed intervals, overlaps counted once.
    static func unionLength(_ spans: [(Date, Date)]) -> TimeInterval {
        var total: TimeInterval = 0
        var current: (start: Date, end: Date)?
        for (start, end) in spans.sorted(by: { $0.0 < $1.0 }) {
            if let c = current, start <= c.end {
                current = (c.start, max(c.end, end))
            } else {
                if let c = current { total += c.end.timeIntervalSince(c.start) }
                current = (start, end)
            }
        }
        if let c = current { total += c.end.timeIntervalSince(c.start) }
        return total
    }
}

extension ChurnStore {
    /// The status of run `runId`; without one, of the unfinished run being worked (an earlier
    /// night's before tonight's waiting one), else the newest unfinished run, else of the
    /// newest run. nil when there is no such run. `now` is the moment figures are measured at.
    public func runStatus(_ runId: Int64?, now: Date) async throws -> RunStatus? {
        try await pool.withConnection { db in
            let selection: PostgresQuery
            if let runId {
                selection = "SELECT \(Self.runColumns) FROM churnwatch.runs WHERE id = \(runId)"
            } else {
                selection = """
                    SELECT \(Self.runColumns) FROM churnwatch.runs WHERE bundle_id = \(app)
                    ORDER BY finished_at IS NULL DESC, status = 'running' DESC, id DESC LIMIT 1
                    """
            }
            guard let run = try db.query(selection).first.map(Self.decodeRun) else { return nil }

            var items = RunProgress()
            var failures: [(ItemFailureClass?, Int)] = []
            for row in try db.query("""
                SELECT status, failure_class, count(*) AS n
                FROM churnwatch.run_items WHERE run_id = \(run.id)
                GROUP BY 1, 2
                """) {
                let n = try row.decode(Int.self, "n")
                switch try row.decode(String.self, "status") {
                case "pending": items.pending += n
                case "claimed": items.claimed += n
                case "done": items.done += n
                case "failed":
                    items.failed += n
                    failures.append((try Self.decodeFailureClass(row), n))
                default: break
                }
            }
            let failedByReason = ItemFailureClass.countedByLabel(failures)

            var calls: [String: Int] = [:]
            // Stats are whatever workers wrote: anything but an object of numbers is skipped.
            for row in try db.query("""
                SELECT c.key, sum((c.value #>> '{}')::numeric)::bigint AS n
                FROM churnwatch.run_workers w,
                     jsonb_each(CASE WHEN jsonb_typeof(w.stats -> 'calls') = 'object' THEN w.stats -> 'calls' ELSE '{}' END) AS c
                WHERE w.run_id = \(run.id) AND jsonb_typeof(c.value) = 'number'
                GROUP BY c.key
                """) {
                calls[try row.decode(String.self, "key")] = try row.decode(Int.self, "n")
            }
            let http429 = try db.query("""
                SELECT sum(CASE WHEN jsonb_typeof(stats -> 'http_429') = 'number' THEN (stats ->> 'http_429')::numeric END)::bigint
                FROM churnwatch.run_workers WHERE run_id = \(run.id)
                """)[0].decode(Int?.self, at: 0)
            let workers = try db.query("""
                SELECT worker, started_at, seen_at FROM churnwatch.run_workers
                WHERE run_id = \(run.id) ORDER BY started_at, worker
                """).map {
                RunStatus.Worker(name: try $0.decode(String.self, "worker"), startedAt: try $0.decode(Date.self, "started_at"),
                                 seenAt: try $0.decode(Date.self, "seen_at"))
            }
            return RunStatus(run: run, items: items, failedByReason: failedByReason, calls: calls,
                             http429: http429, workers: workers, measuredAt: now)
        }
    }
}
