import Foundation
import Postgres
import Testing

/// Faults found from outside (issue #18): an interrupted night must not swallow the next one, a
/// stored far-future Retry-After must not stall later runs, and a server slower than the
/// configured rate must not leave items failed "rate limited" in a run that exits 0.
@Suite("run faults: nights, stored pauses, 429 bursts", .serialized)
struct RunFaultsTests {
    typealias World = NightlyRunEndToEndTests.World
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    @Test("an interrupted night does not swallow the next: each night gets its own run and its own segment_daily day, even when the second is stopped while it finishes the first")
    func interruptedNightKeepsTheNext() async throws {
        let world = try await World.make(subscribers: 48, seed: 41, simFlags: ["--latency-ms", "400"])
        defer { world.close() }
        let db = try world.connect()
        let env = world.env
        let (night1, night2) = (Self.start, Self.start.addingTimeInterval(Self.day))
        let common = ["--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + Self.fast
        @Sendable func claimed(_ run: Int) throws -> Int {
            try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(run) AND status = 'claimed'")[0].decode(Int.self, at: 0)
        }
        @Sendable func runs() throws -> [String] {
            try db.query("SELECT id::text || ' ' || status FROM churnwatch.runs ORDER BY id").map { try $0.decode(String.self, at: 0) }
        }

        // 1. Night 1 is stopped (SIGTERM) while it holds claims: exit 75, resumable.
        try world.sim.setClock(Self.iso(night1))
        let first = try await OwnThread.run {
            let p = try RunningCLI(["run", "--as-of", Self.iso(night1)] + common, environment: env)
            _ = try Harness.waitUntil(timeout: 60) { try claimed(1) > 0 || !p.process.isRunning }
            return Harness.signalAndWait(p, SIGTERM)
        }
        #expect(first.result.status == 75, "\(first.result.stderr.suffix(300))")
        #expect(try runs() == ["1 interrupted"])

        // 2. Night 2 plans its own run, then finishes night 1 first; stopped meanwhile, both stay resumable.
        try world.sim.setClock(Self.iso(night2))
        let second = try await OwnThread.run { () throws -> (Bool, Harness.Ended) in
            let p = try RunningCLI(["run", "--as-of", Self.iso(night2)] + common, environment: env)
            let announced = p.waitForStderrBlocking(containing: "finishing it first", timeout: 60)
            _ = try Harness.waitUntil(timeout: 60) { try claimed(1) > 0 || !p.process.isRunning }
            return (announced, Harness.signalAndWait(p, SIGTERM))
        }
        #expect(second.0, "night 2 never said it finishes night 1 first: \(second.1.result.stderr.suffix(500))")
        #expect(second.1.result.status == 75, "\(second.1.result.stderr.suffix(300))")
        #expect(second.1.result.stderr.contains("resumable: run 1"), "\(second.1.result.stderr.suffix(300))")
        #expect(try runs() == ["1 interrupted", "2 interrupted"])

        // 3. Night 2 again: night 1 closed first, then night 2; each wrote its own day.
        let third = try await CLIRunner.run(["run", "--as-of", Self.iso(night2)] + common, environment: env)
        #expect(third.status == 0, "\(third.stderr.suffix(500))")
        let done1 = third.stdout.range(of: "run 1 done:"), done2 = third.stdout.range(of: "run 2 done:")
        #expect(done1 != nil && done2 != nil && done1!.lowerBound < done2!.lowerBound, "\(third.stdout)")
        #expect(try runs() == ["1 done", "2 done"])
        let asOf = try db.query("SELECT as_of FROM churnwatch.runs ORDER BY id").map { try $0.decode(Date.self, at: 0) }
        #expect(asOf == [night1, night2])
        let days = try db.query("SELECT DISTINCT day::text FROM churnwatch.segment_daily ORDER BY 1").map { try $0.decode(String.self, at: 0) }
        #expect(days == ["2026-10-01", "2026-10-02"], "\(days)")
        let open = try db.query("SELECT count(*) FROM churnwatch.run_items WHERE status NOT IN ('done', 'failed')")[0].decode(Int.self, at: 0)
        #expect(open == 0)
        let polled2 = try db.query("SELECT count(*) FILTER (WHERE status = 'done'), (SELECT due FROM churnwatch.runs WHERE id = 2) FROM churnwatch.run_items WHERE run_id = 2")[0]
        #expect(try polled2.decode(Int.self, at: 0) == polled2.decode(Int.self, at: 1), "night 2 skipped items")
        #expect(try polled2.decode(Int.self, at: 1) > 0)
        // What was still open in night 1 when night 2 was planned is polled there, not twice.
        let twice = try db.query("""
            SELECT count(*) FROM churnwatch.run_items a JOIN churnwatch.run_items b USING (original_transaction_id)
            WHERE a.run_id = 1 AND b.run_id = 2 AND a.finished_at > (SELECT started_at FROM churnwatch.runs WHERE id = 2)
            """)[0].decode(Int.self, at: 0)
        #expect(twice == 0, "\(twice) subscriptions polled for both nights after night 2 was planned")
    }

    @Test("a Retry-After in 2100 stored in api_budget by an older version does not stall the next night: the pause is dropped with a warning and the run finishes")
    func farFuturePauseDoesNotStall() async throws {
        let world = try await World.make(subscribers: 60, seed: 42)
        defer { world.close() }
        let db = try world.connect()
        #expect(try await world.night(Self.start, extra: Self.fast).status == 0)
        let paused = try db.execute("UPDATE churnwatch.api_budget SET paused_until = '2100-01-01T00:00:00Z'")
        #expect(paused > 0, "the first night should have created budget rows")
        let r = try await world.night(Self.start.addingTimeInterval(Self.day), extra: Self.fast)
        #expect(r.status == 0, "\(r.stderr.suffix(500))")
        #expect(r.stdout.contains("run 2 done:") && r.stdout.contains(" 0 failed"), "\(r.stdout)")
        #expect(r.stderr.contains("dropped a stored Apple rate-limit pause past APPSTORE_MAX_RETRY_WAIT"), "\(r.stderr.suffix(500))")
        // The status bucket (every poll draws from it) no longer holds the pause; a bucket the
        // night did not draw from drops it when it is first drawn from.
        let left = try db.query("""
            SELECT count(*) FROM churnwatch.api_budget WHERE key LIKE '%/status/%' AND paused_until > now() + interval '1 minute'
            """)[0].decode(Int.self, at: 0)
        #expect(left == 0)
    }

    @Test("configured at 2,000/s against a server that takes 20/s: the back-off finds the server's rate, and every item is polled (none left failed 'rate limited'), exit 0")
    func burstOf429sAgainstASlowServer() async throws {
        let world = try await World.make(subscribers: 150, seed: 43, simFlags: ["--rate", "20", "--receipt-share", "0", "--sandbox-share", "0"])
        defer { world.close() }
        let db = try world.connect()
        let started = Date()
        let r = try await world.night(Self.start, extra: ["--status-rate", "2000", "--history-rate", "2000"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(r.status == 0, "\(r.stderr.suffix(500))")
        let items = try db.query("SELECT count(*) FILTER (WHERE status = 'done'), count(*) FROM churnwatch.run_items")[0]
        #expect(try items.decode(Int.self, at: 0) == items.decode(Int.self, at: 1), "items not done: \(r.stdout)")
        let stats = try world.sim.stats()
        let served = stats.requests.values.reduce(0) { $0 + $1.filter { $0.key == "200" }.values.reduce(0, +) }
        print("2,000/s against 20/s: \(served) answered, \(stats.rate_limited) refused (429) in \(String(format: "%.1f", elapsed)) s")
        // Before: 988 refusals and items left failed "rate limited" (the rate halved per 429 to a floor 12 times the server's).
        // With the shared rate cut by the refused share (issue 29): 108-130 refusals alone, up to about 310 on a machine
        // busy with the rest of the suite and a benchmark (the cuts follow the answers, which come later there).
        #expect(stats.rate_limited < 2 * served, "\(stats.rate_limited) 429s against \(served) answers")
    }
}
