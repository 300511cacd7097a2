import Foundation
import Postgres
import Testing

/// How `churnwatch run` behaves as an operator relies on: re-runs, concurrency, the shared
/// budget, faults and windows. Each test has its own simulator and database.
@Suite("churnwatch run behaviour against the simulator", .serialized)
struct RunBehaviourTests {
    typealias World = NightlyRunEndToEndTests.World
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    /// A fingerprint of everything a run writes for the retention team.
    static func fingerprint(_ db: PostgresConnection) throws -> [String] {
        try [
            "SELECT count(*)::text FROM churnwatch.churn_events",
            "SELECT md5(string_agg(id::text || status || campaign || episode, ',' ORDER BY id)) FROM churnwatch.winback_queue",
            "SELECT md5(string_agg(original_transaction_id || segment || segment_since::text, ',' ORDER BY original_transaction_id)) FROM churnwatch.subscription_segments",
            "SELECT md5(string_agg(original_transaction_id || coalesce(snapshot::text, '') || coalesce(last_success_at::text, ''), ',' ORDER BY original_transaction_id)) FROM churnwatch.subscriptions",
            "SELECT count(*)::text FROM churnwatch.transactions",
        ].map { sql in try db.query(PostgresQuery(stringLiteral: sql))[0].decode(String?.self, at: 0) ?? "" }
    }

    @Test("re-running a night changes nothing")
    func rerunIsNoop() async throws {
        let world = try await World.make(subscribers: 400, seed: 21)
        defer { world.close() }
        let db = try world.connect()
        await #expect(try world.night(Self.start, extra: Self.fast).status == 0)
        let night1 = Self.start.addingTimeInterval(Self.day)
        await #expect(try world.night(night1, extra: Self.fast).status == 0)
        let before = try Self.fingerprint(db)
        let again = try await world.night(night1, extra: Self.fast)
        #expect(again.status == 0, "\(again.stderr.suffix(300))")
        #expect(try Self.fingerprint(db) == before)
    }

    @Test("two runs at once: one works, the other exits 0 saying another run is in progress")
    func concurrentRuns() async throws {
        let world = try await World.make(subscribers: 400, seed: 22, simFlags: ["--latency-ms", "20"])
        defer { world.close() }
        try world.sim.setClock(Self.iso(Self.start))
        // 25 calls a second: the first run lasts about 16 s, so the second (a process started on a
        // machine the whole suite loads) finds it still working (at 100 a second it once found it done).
        let args = ["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--status-rate", "25", "--history-rate", "25"]
        let first = try RunningCLI(args, environment: world.env)
        #expect(try await first.waitForStderr(containing: "planned run", timeout: 120), "\(first.stderr.suffix(300))")
        let second = try await CLIRunner.run(args, environment: world.env)
        #expect(second.status == 0)
        #expect(second.stdout.contains("another run is in progress: run 1"), "\(second.stdout) \(second.stderr)")
        let done = try await first.wait()
        #expect(done.status == 0, "\(done.stderr.suffix(300))")
        #expect(done.stdout.contains("run 1 done: 400 due, 400 polled"), "\(done.stdout)")
    }

    @Test("three processes work one run within one budget and finish every item once")
    func threeProcessesShareTheBudget() async throws {
        let rate = 40.0
        let world = try await World.make(subscribers: 300, seed: 23, simFlags: ["--rate", "\(Int(rate))", "--receipt-share", "0", "--sandbox-share", "0"])
        defer { world.close() }
        try world.sim.setClock(Self.iso(Self.start))
        let rates = ["--status-rate", "\(rate)", "--history-rate", "\(rate)"]
        let started = Date()
        let owner = try RunningCLI(["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + rates, environment: world.env)
        #expect(try await owner.waitForStderr(containing: "planned run", timeout: 120))
        let helpers = try (0..<2).map { _ in
            try RunningCLI(["run", "--join", "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + rates, environment: world.env)
        }
        var results = [try await owner.wait()]
        for helper in helpers { results.append(try await helper.wait()) }
        let elapsed = Date().timeIntervalSince(started)
        for r in results { #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))") }
        let db = try world.connect()
        let items = try db.query("SELECT count(*) FILTER (WHERE status = 'done'), count(*), max(attempts) FROM churnwatch.run_items")[0]
        #expect(try items.decode(Int.self, at: 0) == 300)
        #expect(try items.decode(Int.self, at: 1) == 300)
        #expect(try items.decode(Int.self, at: 2) == 1, "an item was claimed twice")
        let workers = try db.query("SELECT count(*) FROM churnwatch.run_workers WHERE run_id = 1")[0].decode(Int.self, at: 0)
        #expect(workers == 3)
        let stats = try world.sim.stats()
        #expect(stats.rate_limited == 0, "the simulator refused \(stats.rate_limited) requests over \(rate)/s")
        let statusCalls = stats.requests["subscriptions"]?.values.reduce(0, +) ?? 0
        #expect(statusCalls == 300, "every subscription's status exactly once")
        // Together no faster than the budget (plus one bucket's worth of burst at the start).
        #expect(Double(statusCalls) <= rate * elapsed + rate / 2 + 1, "\(statusCalls) status calls in \(elapsed) s")
        print("three processes: \(statusCalls) status calls in \(String(format: "%.1f", elapsed)) s at \(rate)/s, 0 refused")
    }

    @Test("rogue, truncated and foreign payloads are quarantined and change nothing; 5 % 500s and a tight limit still poll every other item")
    func faults() async throws {
        let world = try await World.make(subscribers: 400, seed: 24, simFlags: [
            "--fault-rate", "0.08", "--error-rate", "0.05", "--rate", "150",
        ])
        defer { world.close() }
        let db = try world.connect()
        let r = try await world.night(Self.start, extra: ["--status-rate", "150", "--history-rate", "150"])
        #expect(r.status == 0, "\(r.stderr.suffix(500))")
        let truth = try world.sim.truth(at: Self.iso(Self.start))
        let rejectedFaults: Set<String> = ["rogue_chain", "truncated_jws", "foreign_bundle"]
        var expectFailed = Set<String>()
        for (otid, t) in truth where t.fault.map(rejectedFaults.contains) == true { expectFailed.insert(otid) }
        #expect(!expectFailed.isEmpty, "the population should have fault subscribers")
        let failed = Set(try db.query("SELECT original_transaction_id FROM churnwatch.run_items WHERE status = 'failed'").map { try $0.decode(String.self, at: 0) })
        // Registered with a receipt alone: verifyReceipt answers are not JWS, so a signing fault
        // cannot reach them. (Subscriptions with an id and a receipt go through the Server API.)
        let receiptOnly = Set(try db.query("""
            SELECT original_transaction_id FROM churnwatch.subscriptions
            WHERE receipt_data IS NOT NULL AND original_transaction_id LIKE 'receipt:%'
            """).map { try $0.decode(String.self, at: 0) })
        #expect(failed == expectFailed.subtracting(receiptOnly), "failed: \(failed.sorted().prefix(5)), expected: \(expectFailed.subtracting(receiptOnly).sorted().prefix(5))")
        let quarantined = Set(try db.query("SELECT DISTINCT original_transaction_id FROM churnwatch.quarantine").map { try $0.decode(String.self, at: 0) })
        #expect(quarantined == failed)
        let touched = try db.query("""
            SELECT count(*) FROM churnwatch.subscriptions
            WHERE original_transaction_id = ANY(\(Array(failed))) AND (snapshot IS NOT NULL OR state IS NOT NULL)
            """)[0].decode(Int.self, at: 0)
        #expect(touched == 0, "a payload that failed verification changed a subscription")
        let reasons = try db.query("SELECT DISTINCT split_part(outcome, ':', 1) FROM churnwatch.run_items WHERE status = 'failed'").map { try $0.decode(String.self, at: 0) }
        #expect(reasons == ["verification"])
        let stats = try world.sim.stats()
        let http500 = stats.requests.values.reduce(0) { $0 + ($1["500"] ?? 0) }
        #expect(http500 > 0, "the simulator should have answered some 500s")
    }

    @Test("windows: a yearly subscriber far from renewal is not polled again; an at-risk one is polled every night")
    func windows() async throws {
        let world = try await World.make(subscribers: 600, seed: 25, simFlags: ["--receipt-share", "0"])
        defer { world.close() }
        let db = try world.connect()
        await #expect(try world.night(Self.start, extra: Self.fast).status == 0)
        let far = try db.query("""
            SELECT original_transaction_id FROM churnwatch.subscriptions
            WHERE state = 'active' AND auto_renew AND product_id = auto_renew_product_id AND price_increase_status IS DISTINCT FROM 0
              AND expires_at > \(Self.start.addingTimeInterval(60 * Self.day)) AND period_start < \(Self.start.addingTimeInterval(-10 * Self.day))
            """).map { try $0.decode(String.self, at: 0) }
        let atRisk = try db.query("""
            SELECT original_transaction_id FROM churnwatch.subscriptions
            WHERE state = 'active' AND auto_renew = false AND expires_at > \(Self.start.addingTimeInterval(5 * Self.day))
            """).map { try $0.decode(String.self, at: 0) }
        #expect(!far.isEmpty && !atRisk.isEmpty, "population should have both kinds (far \(far.count), at risk \(atRisk.count))")
        for night in 1...3 {
            await #expect(try world.night(Self.start.addingTimeInterval(Double(night) * Self.day), extra: Self.fast).status == 0)
        }
        let farPolled = try db.query("""
            SELECT count(*) FROM churnwatch.run_items WHERE run_id > 1 AND original_transaction_id = ANY(\(far))
            """)[0].decode(Int.self, at: 0)
        #expect(farPolled == 0, "yearly subscribers far from renewal were polled again")
        let riskPolls = try db.query("""
            SELECT original_transaction_id, count(*) FROM churnwatch.run_items
            WHERE run_id > 1 AND original_transaction_id = ANY(\(atRisk)) GROUP BY 1
            """).map { try $0.decode(Int.self, at: 1) }
        // Still at risk until something changes: polled on each of the three nights.
        #expect(riskPolls.count == atRisk.count)
        #expect(riskPolls.allSatisfy { $0 == 3 } || riskPolls.filter { $0 == 3 }.count * 10 >= riskPolls.count * 9,
                "at-risk polls per night: \(riskPolls)")
    }
}
