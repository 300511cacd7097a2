import Foundation
import Postgres
import Testing

/// `churnwatch backfill` against the simulator: cohorts, dry runs, full histories, one backfill
/// at a time, crash and resume, and sharing Apple's budget with a nightly run. Plus the
/// configuration errors of `run` and `backfill`.
@Suite("churnwatch backfill against the simulator", .serialized)
struct BackfillTests {
    typealias World = NightlyRunEndToEndTests.World
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    @Test("a cohort (product AND environment, or a list of ids) is polled exactly; --dry-run counts it and writes nothing; --full-history reads every history again")
    func cohorts() async throws {
        let world = try await World.make(subscribers: 300, seed: 41)
        defer { world.close() }
        let db = try world.connect()
        #expect(try await Harness.night(Self.start, sim: world.sim, env: world.env, extra: Self.fast).status == 0)
        let product = "sim.premium.standard.monthly"
        let expected = Set(try db.query("""
            SELECT original_transaction_id FROM churnwatch.subscriptions WHERE product_id = \(product) AND environment = 'Production'
            """).map { try $0.decode(String.self, at: 0) })
        let receipts = try db.query("""
            SELECT count(*) FROM churnwatch.subscriptions WHERE product_id = \(product) AND environment = 'Production'
              AND receipt_data IS NOT NULL AND original_transaction_id LIKE 'receipt:%'  -- a receipt alone (issue 19)
            """)[0].decode(Int.self, at: 0)
        #expect(expected.count > 20)

        let when = Self.start.addingTimeInterval(2 * Self.day)
        try world.sim.setClock(Self.iso(when))
        let cohort = ["--product", product, "--environment", "production", "--as-of", Self.iso(when)]
        let dry = try await CLIRunner.run(["backfill"] + cohort + ["--full-history", "--dry-run", "--status-rate", "10"], environment: world.env)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains(": \(expected.count) subscriptions (0 never polled, \(receipts) with legacy receipts)"), "\(dry.stdout)")
        #expect(dry.stdout.contains("ETA at 10/s status"), "\(dry.stdout)")
        #expect(try db.query("SELECT count(*) FROM churnwatch.runs")[0].decode(Int.self, at: 0) == 1, "a dry run writes nothing")

        let historyBefore = try Self.historyRequests(world.sim)
        let r = try await CLIRunner.run(["backfill"] + cohort + ["--full-history", "--log-format", "json"] + Self.fast, environment: world.env)
        #expect(r.status == 0, "\(r.stderr.suffix(500))")
        #expect(r.stdout.contains("run 2 done: \(expected.count) due, \(expected.count) polled, 0 failed"), "\(r.stdout)")
        let planned = Set(try db.query("SELECT original_transaction_id FROM churnwatch.run_items WHERE run_id = 2").map { try $0.decode(String.self, at: 0) })
        #expect(planned == expected)
        let run = try db.query("SELECT kind, params->>'full_history', params->'cohort'->>'environment' FROM churnwatch.runs WHERE id = 2")[0]
        #expect(try run.decode(String.self, at: 0) == "backfill")
        #expect(try run.decode(String.self, at: 1) == "true" && run.decode(String.self, at: 2) == "Production")
        // Every subscription polled through the Server API read its history (at least a page).
        let historyCalls = try Self.historyRequests(world.sim) - historyBefore
        #expect(historyCalls >= expected.count - receipts, "history requests: \(historyCalls) for \(expected.count - receipts) subscriptions")

        // A list of ids: registered ones only, blank lines and comments skipped.
        let ids = Array(expected.sorted().prefix(5))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ids-\(UUID().uuidString.prefix(8)).txt")
        defer { try? FileManager.default.removeItem(at: file) }
        try (["# five registered, one not", ""] + ids + ["999999999999999", ids[0]]).joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let dryIds = try await CLIRunner.run(["backfill", "--ids", file.path, "--dry-run"], environment: world.env)
        #expect(dryIds.status == 0)
        #expect(dryIds.stdout.contains(": 5 subscriptions"), "\(dryIds.stdout)")
        #expect(dryIds.stdout.contains("not registered subscriptions (left out): 1"), "\(dryIds.stdout)")
        let byIds = try await CLIRunner.run(["backfill", "--ids", file.path, "--as-of", Self.iso(when), "--log-format", "json"] + Self.fast, environment: world.env)
        #expect(byIds.status == 0, "\(byIds.stderr.suffix(300))")
        #expect(byIds.stdout.contains("run 3 done: 5 due, 5 polled"), "\(byIds.stdout)")
    }

    @Test("one backfill at a time; a killed backfill is resumed by the same command; a backfill of another cohort is refused until then")
    func oneAtATimeAndResume() async throws {
        let world = try await World.make(subscribers: 300, seed: 42, simFlags: ["--latency-ms", "20"])
        defer { world.close() }
        let db = try world.connect()
        #expect(try await Harness.night(Self.start, sim: world.sim, env: world.env, extra: Self.fast).status == 0)
        let when = Self.start.addingTimeInterval(3 * Self.day)
        try world.sim.setClock(Self.iso(when))
        // One item at a time (about 20 s for the cohort), so it is still at work for what follows.
        let args = ["backfill", "--all", "--as-of", Self.iso(when), "--log-format", "json", "--concurrency", "1", "--batch-size", "1"] + Self.fast
        let env = world.env
        let nightlyArgs = ["run", "--as-of", Self.iso(when), "--log-format", "json"] + Self.fast
        // All on one thread, so nothing waits for a cooperative thread while the backfill works.
        let (planned, second, nightly, ended) = try await OwnThread.run { () throws -> (Bool, CLIRunner.Result, CLIRunner.Result, Harness.Ended) in
            let first = try RunningCLI(args, environment: env)
            let planned = first.waitForStderrBlocking(containing: "planned backfill", timeout: 60)
            let second = try CLIRunner.runBlocking(args, environment: env)
            // A nightly run is not blocked by a backfill (separate locks).
            let nightly = try CLIRunner.runBlocking(nightlyArgs, environment: env)
            _ = try Harness.waitUntil(timeout: 60) { try Harness.finished(db, run: 2) >= 20 || !first.process.isRunning }
            let ended = Harness.signalAndWait(first, SIGKILL)
            _ = try Harness.waitForNoAdvisoryLocks(world.db)
            return (planned, second, nightly, ended)
        }
        #expect(planned, "\(ended.result.stderr.suffix(300))")
        #expect(second.status == 0)
        #expect(second.stdout.contains("another backfill is in progress: run 2"), "\(second.stdout) \(second.stderr.suffix(200))")
        #expect(nightly.status == 0 && nightly.stdout.contains("run 3 done:"), "\(nightly.stdout) \(nightly.stderr.suffix(300))")
        #expect(ended.bySignal, "the backfill ended before the kill: \(ended.result.stderr.suffix(300))")

        let other = try await CLIRunner.run(["backfill", "--segment", "active", "--log-format", "json"] + Self.fast, environment: world.env)
        #expect(other.status == 75, "\(other.stdout) \(other.stderr)")
        #expect(other.stderr.contains("backfill run 2 (all) is unfinished"), "\(other.stderr)")

        // The same cohort resumes (at any concurrency).
        let fasterArgs = ["backfill", "--all", "--as-of", Self.iso(when), "--log-format", "json", "--concurrency", "16", "--batch-size", "4"] + Self.fast
        let resumed = try await CLIRunner.run(fasterArgs, environment: world.env)
        #expect(resumed.status == 0, "\(resumed.stderr.suffix(500))")
        #expect(resumed.stderr.contains("resuming run"), "\(resumed.stderr.suffix(300))")
        #expect(resumed.stdout.contains("run 2 done: 300 due, 300 polled, 0 failed"), "\(resumed.stdout)")
        let kinds = try db.query("SELECT kind, count(*) FROM churnwatch.runs GROUP BY 1 ORDER BY 1").map {
            "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Int.self, at: 1))"
        }
        #expect(kinds == ["backfill 1", "nightly 2"])
        let nothing = try await CLIRunner.run(["backfill", "--resume"], environment: world.env)
        #expect(nothing.status == 0 && nothing.stdout.contains("no unfinished backfill to resume"), "\(nothing.stdout) \(nothing.stderr)")
    }

    @Test("a backfill and a nightly run at once stay within Apple's budget (no 429), and the backfill keeps to 20 % of it while the nightly run works")
    func sharesTheBudget() async throws {
        let rate = 20.0
        let world = try await World.make(subscribers: 150, seed: 43, simFlags: ["--rate", "\(Int(rate))", "--receipt-share", "0", "--sandbox-share", "0"])
        defer { world.close() }
        try world.sim.setClock(Self.iso(Self.start))
        let db = try world.connect()
        let rates = ["--status-rate", "\(rate)", "--history-rate", "\(rate)"]
        let env = world.env
        let (backfill, nightly) = try await OwnThread.run { () throws -> (RunningCLI, RunningCLI) in
            let backfill = try RunningCLI(["backfill", "--all", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + rates,
                                          environment: env)
            _ = backfill.waitForStderrBlocking(containing: "planned backfill", timeout: 60)
            let nightly = try RunningCLI(["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + rates,
                                         environment: env)
            return (backfill, nightly)
        }
        let nightlyResult = try await nightly.wait()
        let backfillResult = try await backfill.wait()
        // The night polls what the backfill had not reached when it was planned (new subscriptions).
        let nightlyDue = try db.query("SELECT due FROM churnwatch.runs WHERE id = 2")[0].decode(Int.self, at: 0)
        #expect(nightlyDue > 100, "the backfill should not have polled most subscriptions before the night began (\(nightlyDue) due)")
        #expect(nightlyResult.status == 0 && nightlyResult.stdout.contains("run 2 done: \(nightlyDue) due, \(nightlyDue) polled, 0 failed"),
                "\(nightlyResult.stdout) \(nightlyResult.stderr.suffix(300))")
        #expect(backfillResult.status == 0 && backfillResult.stdout.contains("run 1 done: 150 due, 150 polled, 0 failed"), "\(backfillResult.stdout) \(backfillResult.stderr.suffix(300))")
        #expect(backfillResult.stderr.contains("a nightly run is active: the backfill keeps to its share of the budget"))
        #expect(backfillResult.stderr.contains("no nightly run: the backfill uses the whole budget"), "back to the whole budget once the night is done")

        let stats = try world.sim.stats()
        #expect(stats.rate_limited == 0, "the simulator refused \(stats.rate_limited) requests over \(rate)/s")
        // While the nightly run worked: the backfill's items against the share it may take.
        let row = try db.query("""
            SELECT extract(epoch FROM n.finished_at - n.started_at)::float8,
                   (SELECT count(*) FROM churnwatch.run_items i WHERE i.run_id = 1 AND i.finished_at BETWEEN n.started_at AND n.finished_at),
                   (SELECT count(*) FROM churnwatch.run_items i WHERE i.run_id = 2)
            FROM churnwatch.runs n WHERE n.id = 2
            """)[0]
        let seconds = try row.decode(Double.self, at: 0)
        let backfillDuring = try row.decode(Int.self, at: 1)
        let nightlyItems = try row.decode(Int.self, at: 2)
        // 20 % of the rate over the night, plus one second at the full rate before the backfill
        // noticed the night (it asks every second), a bucket's worth of burst, and the 8 polls
        // it had in flight when the night began.
        let allowed = 0.2 * rate * seconds + rate * 1.0 + rate / 2 + 8
        print("budget share: nightly \(nightlyItems) items in \(String(format: "%.1f", seconds)) s; backfill \(backfillDuring) items meanwhile (allowed \(Int(allowed)), without yielding about \(Int(rate * seconds / 2)))")
        #expect(Double(backfillDuring) <= allowed)
    }

    @Test("bad configuration of each kind: exit 78 and one line naming it, before any work")
    func badConfiguration() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 10, seed: 44, start: Self.iso(Self.start))
        defer { sim.stop() }
        var good = sim.environment
        // Nothing listens there: a check that reaches the database would fail with 69, not 78.
        good["DATABASE_URL"] = "postgresql://postgres@127.0.0.1:1/none"
        func without(_ key: String) -> [String: String] { var e = good; e[key] = nil; return e }
        func with(_ key: String, _ value: String) -> [String: String] { var e = good; e[key] = value; return e }
        let cases: [(String, [String], [String: String], String)] = [
            ("no DATABASE_URL", [], without("DATABASE_URL"), "DATABASE_URL"),
            ("no issuer id", [], without("APPSTORE_ISSUER_ID"), "APPSTORE_ISSUER_ID"),
            ("missing key file", [], with("APPSTORE_PRIVATE_KEY_PATH", "/nonexistent/AuthKey.p8"), "APPSTORE_PRIVATE_KEY_PATH"),
            ("bad environment", [], with("APPSTORE_ENVIRONMENT", "Staging"), "APPSTORE_ENVIRONMENT"),
            ("bad rate", [], with("APPSTORE_STATUS_RATE", "fast"), "APPSTORE_STATUS_RATE"),
            ("bad retry setting", [], with("APPSTORE_MAX_ATTEMPTS", "-1"), "APPSTORE_MAX_ATTEMPTS"),
            ("missing root certificate", [], with("APPSTORE_ROOT_CERTS", "/nonexistent/root.der"), "APPSTORE_ROOT_CERTS"),
            ("bad --as-of", ["--as-of", "yesterday"], good, "--as-of"),
            ("bad --max-duration", ["--max-duration", "soon"], good, "--max-duration"),
            ("bad --shutdown-grace", ["--shutdown-grace", "a while"], good, "--shutdown-grace"),
        ]
        for command in [["run"], ["backfill", "--all"]] {
            for (name, flags, env, mention) in cases {
                let r = try await CLIRunner.run(command + flags, environment: env)
                let lines = r.stderr.split(separator: "\n")
                #expect(r.status == 78, "\(command[0]) \(name): \(r.status) \(r.stderr)")
                #expect(lines.count == 1 && r.stderr.contains(mention), "\(command[0]) \(name): \(r.stderr)")
            }
        }
        let runOnly: [(String, [String], String)] = [
            ("bad window", ["--start-window", "3x"], "--start-window"),
            ("bad stale-after", ["--stale-after", "3w"], "--stale-after"),
            ("zero concurrency", ["--concurrency", "0"], "--concurrency"),
        ]
        let backfillOnly: [(String, [String], String)] = [
            ("no cohort", [], "needs a cohort"),
            ("bad purchase date", ["--purchased-from", "last spring"], "--purchased-from"),
            ("empty purchase range", ["--purchased-from", "2026-02-01", "--purchased-to", "2026-01-01"], "--purchased-from"),
            ("missing ids file", ["--ids", "/nonexistent/ids.txt"], "--ids"),
            ("unknown segment", ["--segment", "angry"], "--segment"),
            ("bad cohort environment", ["--environment", "Staging"], "--environment"),
            ("bad share", ["--all", "--nightly-share", "1.5"], "--nightly-share"),
            ("--resume with a cohort", ["--resume", "--all"], "--resume"),
        ]
        for (name, flags, mention) in runOnly.map({ ($0.0, ["run"] + $0.1, $0.2) }) + backfillOnly.map({ ($0.0, ["backfill"] + $0.1, $0.2) }) {
            let r = try await CLIRunner.run(flags, environment: good)
            #expect(r.status == 78 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(mention), "\(name): \(r.status) \(r.stderr)")
        }
        // Good configuration with the database unreachable: 69, one line.
        for command in [["run"], ["backfill", "--all"]] {
            let r = try await CLIRunner.run(command, environment: good)
            #expect(r.status == 69 && r.stderr.split(separator: "\n").count == 1, "\(command[0]): \(r.status) \(r.stderr)")
        }
    }

    static func historyRequests(_ sim: SimulatorProcess) throws -> Int {
        let stats = try sim.stats()
        return stats.requests.filter { $0.key.contains("history") }.values.reduce(0) { $0 + $1.values.reduce(0, +) }
    }
}
