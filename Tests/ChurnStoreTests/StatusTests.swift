import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore.runStatus (churnwatch status)")
struct StatusTests {
    static let t = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC

    static func at(_ seconds: TimeInterval) -> Date { t.addingTimeInterval(seconds) }

    static func migrated(_ fresh: FreshDatabase) throws -> PostgresConnection {
        let db = try fresh.connect()
        try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
        return db
    }

    @discardableResult
    static func run(_ db: PostgresConnection, started: Date, finished: Date?, status: String, due: Int = 0) throws -> Int64 {
        try db.query("""
            INSERT INTO churnwatch.runs (kind, as_of, started_at, finished_at, status, due)
            VALUES ('nightly', \(started), \(started), \(finished), \(status), \(due)) RETURNING id
            """)[0].decode(Int64.self, "id")
    }

    /// `failureClass` as the batch commit stores it with a failed item.
    static func items(_ db: PostgresConnection, run: Int64, status: String, outcome: String?, failureClass: ItemFailureClass? = nil,
                      count: Int, prefix: String) throws {
        for i in 0..<count {
            try db.execute("""
                INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status, outcome, failure_class)
                VALUES (\(run), \(prefix + String(i)), 'new', \(status), \(outcome), \(failureClass?.rawValue))
                """)
        }
    }

    static func worker(_ db: PostgresConnection, run: Int64, _ name: String, from: TimeInterval, to: TimeInterval, stats: String) throws {
        try db.execute("""
            INSERT INTO churnwatch.run_workers (run_id, worker, started_at, seen_at, stats)
            VALUES (\(run), \(name), \(at(from)), \(at(to)), \(PostgresJSON(text: stats)))
            """)
    }

    @Test("figures of a crafted run: items, failures by reason, calls summed over workers, rates over worker time, ETA")
    func craftedRun() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let old = try Self.run(db, started: Self.at(-2 * 86_400), finished: Self.at(-2 * 86_400 + 600), status: "done")
            let current = try Self.run(db, started: Self.t, finished: nil, status: "running", due: 20)
            try Self.run(db, started: Self.at(-60), finished: Self.at(-30), status: "done") // newer, but finished
            try Self.items(db, run: current, status: "done", outcome: "ok", count: 6, prefix: "d")
            try Self.items(db, run: current, status: "failed", outcome: "not found: 4040010", failureClass: .notFound, count: 2, prefix: "n")
            try Self.items(db, run: current, status: "failed", outcome: "verification: chain: untrusted root", failureClass: .verification, count: 1, prefix: "v")
            try Self.items(db, run: current, status: "failed", outcome: nil, failureClass: .unknown, count: 1, prefix: "u")
            try Self.items(db, run: current, status: "claimed", outcome: nil, count: 2, prefix: "c")
            try Self.items(db, run: current, status: "pending", outcome: nil, count: 8, prefix: "p")
            // Two overlapping workers, then one after a pause (an interrupted run resumed).
            try Self.worker(db, run: current, "host-a:1", from: 0, to: 100, stats: #"{"calls": {"status": 30, "history": 10}, "http_429": 2}"#)
            try Self.worker(db, run: current, "host-b:2", from: 50, to: 200, stats: #"{"calls": {"status": 20, "receipt": 5}}"#)
            try Self.worker(db, run: current, "host-a:3", from: 1000, to: 1100,
                            stats: #"{"calls": {"status": "garbage", "history": 5}, "http_429": "x"}"#)

            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let s = try #require(try await store.runStatus(nil, now: Self.at(1200)))
            #expect(s.run.id == current, "the unfinished run is the current one, even with a newer finished run")
            #expect(s.run.due == 20 && s.run.status == .running)
            #expect(s.items.done == 6 && s.items.failed == 4 && s.items.claimed == 2 && s.items.pending == 8 && s.items.total == 20)
            #expect(s.finishedItems == 10)
            #expect(s.failedByReason == ["not found": 2, "verification": 1, "unknown": 1])
            #expect(s.calls == ["status": 50, "history": 15, "receipt": 5])
            #expect(s.callsTotal == 70)
            #expect(s.http429 == 2)
            #expect(s.workers.map(\.name) == ["host-a:1", "host-b:2", "host-a:3"])
            #expect(s.lastSeen == Self.at(1100))
            #expect(s.activeSeconds == 300, "[0,200] and [1000,1100]: the pause does not count")
            #expect(s.callRate == 70.0 / 300)
            #expect(s.itemRate == 10.0 / 300)
            #expect(s.eta == 300, "10 items left at 1 item per 30 s")

            let older = try #require(try await store.runStatus(old, now: Self.at(1200)))
            #expect(older.run.id == old && older.run.finishedAt != nil)
            #expect(older.items.total == 0 && older.workers.isEmpty && older.http429 == nil)
            #expect(older.activeSeconds == 600, "without workers: from start to finish")
            #expect(older.eta == 0)

            #expect(try await store.runStatus(9999, now: Self.t) == nil)
        }
    }

    @Test("without an unfinished run the newest run is shown; without any run, nothing")
    func selection() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            #expect(try await store.runStatus(nil, now: Self.t) == nil)
            try Self.run(db, started: Self.at(-7200), finished: Self.at(-7000), status: "done")
            let newest = try Self.run(db, started: Self.at(-3600), finished: Self.at(-3000), status: "done")
            #expect(try await store.runStatus(nil, now: Self.t)?.run.id == newest)
        }
    }

    @Test("no ETA before any item finished; no rate before any time passed")
    func noRateYet() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let id = try Self.run(db, started: Self.t, finished: nil, status: "running", due: 3)
            try Self.items(db, run: id, status: "pending", outcome: nil, count: 3, prefix: "p")
            try Self.worker(db, run: id, "w", from: 0, to: 0, stats: "{}")
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let s = try #require(try await store.runStatus(id, now: Self.at(5)))
            #expect(s.activeSeconds == 0 && s.callRate == nil && s.itemRate == nil && s.eta == nil)
            #expect(s.calls.isEmpty && s.http429 == nil)
        }
    }
}
