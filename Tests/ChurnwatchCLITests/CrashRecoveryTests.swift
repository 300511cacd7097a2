import Foundation
import Postgres
import Testing

/// churnwatch stopped in every way a night can stop it: kill -9 at random moments, SIGTERM
/// (once, twice), a time budget, PostgreSQL going away, Apple going away. Each time the next
/// `run` resumes, and the end state equals that of a night nobody interrupted.
@Suite("crash recovery, graceful shutdown and outages", .serialized)
struct CrashRecoveryTests {
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    @Test("kill -9 at 20 random moments of a night, each time resumed: the end state equals an uninterrupted night's")
    func killNineTwentyTimes() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 400, seed: 31, start: Self.iso(Self.start), extra: ["--latency-ms", "15"])
        defer { sim.stop() }
        let reference = try await OwnThread.run { try Harness.database(sim: sim) }
        defer { reference.db.drop() }
        // Night 0 (a baseline: first polls write no events) once, then the same database twice.
        #expect(try await Harness.night(Self.start, sim: sim, env: reference.env, extra: Self.fast).status == 0)
        let killed = try await OwnThread.run { try Harness.clone(reference, sim: sim) }
        defer { killed.db.drop() }

        let night = Self.start.addingTimeInterval(5 * Self.day)
        let nightArgs = ["--stale-after", "1d"] + Self.fast
        let uninterrupted = try await Harness.night(night, sim: sim, env: reference.env, extra: nightArgs + ["--concurrency", "32"])
        #expect(uninterrupted.status == 0, "\(uninterrupted.stderr.suffix(300))")

        let db = try PostgresConnection(connectionString: killed.db.connectionURL, logger: .postgres)
        let due = try PostgresConnection(connectionString: reference.db.connectionURL, logger: .postgres)
            .query("SELECT due FROM churnwatch.runs WHERE id = 2")[0].decode(Int.self, at: 0)
        #expect(due > 300, "the night should poll nearly everyone (\(due))")
        var seed = ProcessInfo.processInfo.environment["KILL_NINE_SEED"].flatMap { UInt64($0) } ?? UInt64(Date().timeIntervalSince1970 * 1000)
        print("kill -9 moments: random seed \(seed) (KILL_NINE_SEED=\(seed) repeats them)")
        var moments: [String] = []
        let args = ["run", "--as-of", Self.iso(night), "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + nightArgs
        let env = killed.env
        for kill in 0..<20 {
            let (dice, random) = (Harness.next(&seed) % 10, Harness.next(&seed))
            // A random moment: at once (before or while planning), right after planning or
            // resuming, or after some more committed items (spread over what is left). The
            // wait and the kill happen on one thread: nothing delays the kill.
            let (moment, reached, ended) = try await OwnThread.run { () throws -> (String, Bool, Harness.Ended) in
                let before = try Harness.finished(db, run: 2)
                let process = try RunningCLI(args, environment: env)
                var moment = "at once"
                var reached = true
                if dice == 1 {
                    // An earlier kill may have come before the night's run was planned at all:
                    // then this process plans it rather than resuming it.
                    let planned = try db.query("SELECT 1 FROM churnwatch.runs WHERE id = 2").count == 1
                    moment = planned ? "after resuming" : "after planning"
                    reached = process.waitForStderrBlocking(containing: planned ? "resuming run" : "planned run", timeout: 60)
                } else if dice > 1 {
                    let spread = max(1, (due - before) / max(1, 21 - kill))
                    let target = before + 1 + Int(random % UInt64(spread))
                    moment = "after \(target) items"
                    reached = try Harness.waitUntil(timeout: 60) { try Harness.finished(db, run: 2) >= target || !process.process.isRunning }
                }
                let ended = Harness.signalAndWait(process, SIGKILL)
                // The next cron firing comes once the dead process's backends are gone.
                reached = try Harness.waitForNoAdvisoryLocks(killed.db) && reached
                return (moment, reached, ended)
            }
            moments.append(moment)
            #expect(reached, "kill \(kill) (\(moment)): never reached, or the locks stayed: \(ended.result.stderr.suffix(300))")
            #expect(ended.bySignal, "kill \(kill) (\(moment)) came too late: the run had ended with \(ended.result.status): \(ended.result.stderr.suffix(300))")
        }
        print("kill -9 moments: \(moments.joined(separator: ", "))")
        let last = try await CLIRunner.run(args, environment: killed.env)
        #expect(last.status == 0, "\(last.stderr.suffix(500))")
        #expect(last.stdout.contains("run 2 done: \(due) due, \(due) polled, 0 failed"), "\(last.stdout)")

        // One run for the night, resumed each time; every item polled; some polled again after a kill.
        let runs = try db.query("SELECT count(*), count(*) FILTER (WHERE status = 'done') FROM churnwatch.runs")[0]
        #expect(try runs.decode(Int.self, at: 0) == 2 && runs.decode(Int.self, at: 1) == 2)
        let attempts = try db.query("SELECT count(*) FILTER (WHERE status = 'done'), max(attempts) FROM churnwatch.run_items WHERE run_id = 2")[0]
        #expect(try attempts.decode(Int.self, at: 0) == due)
        print("kill -9: max attempts of an item \(try attempts.decode(Int.self, at: 1))")
        try Harness.expectSameEndState(killed.db, reference.db)
    }

    @Test("SIGTERM: in-flight work finishes within the grace and is committed (or given back when the grace runs out), exit 75 and the run is interrupted; a second signal exits at once; --max-duration ends a run the same way; the next run resumes and finishes")
    func gracefulShutdown() async throws {
        // Every answer takes 1.5 s, so a batch (status, then history) is in flight for about 3 s.
        let world = try await NightlyRunEndToEndTests.World.make(subscribers: 48, seed: 32, simFlags: ["--latency-ms", "1500"])
        defer { world.close() }
        try world.sim.setClock(Self.iso(Self.start))
        let db = try world.connect()
        let args = ["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + Self.fast
        @Sendable func items() throws -> [String: Int] {
            var out: [String: Int] = [:]
            for row in try db.query("SELECT status, count(*) FROM churnwatch.run_items GROUP BY 1") {
                out[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
            }
            return out
        }
        @Sendable func runStatus() throws -> String { try db.query("SELECT status FROM churnwatch.runs WHERE id = 1")[0].decode(String.self, at: 0) }
        /// Starts a run, waits until it holds claims, then signals it (all on one thread).
        func claimsThen(_ extra: [String] = [], _ act: @escaping @Sendable (RunningCLI, Int) throws -> Harness.Ended) async throws -> (claimed: Int, ended: Harness.Ended) {
            let env = world.env
            return try await OwnThread.run {
                let p = try RunningCLI(args + extra, environment: env)
                _ = try Harness.waitUntil(timeout: 60) { try (items()["claimed"] ?? 0) > 0 || !p.process.isRunning }
                let claimed = try items()["claimed"] ?? 0
                return (claimed, try act(p, claimed))
            }
        }

        // 1. The grace runs out before Apple answers: in-flight polls are abandoned, their items go back.
        let short = try await claimsThen(["--shutdown-grace", "0.3s"]) { p, _ in Harness.signalAndWait(p, SIGTERM) }
        #expect(short.claimed > 0)
        #expect(short.ended.result.status == 75, "\(short.ended.result.stderr.suffix(300))")
        #expect(short.ended.result.stderr.contains("resumable: run 1 (stopped: signal)"), "\(short.ended.result.stderr.suffix(300))")
        #expect(short.ended.afterSignal < 2.5, "exit took \(short.ended.afterSignal) s with a 0.3 s grace (answers take 3 s)")
        let afterShort = try items()
        #expect(afterShort["claimed"] == nil && afterShort["done"] == nil, "\(afterShort)")
        #expect(try runStatus() == "interrupted")
        #expect(try db.query("SELECT max(attempts) FROM churnwatch.run_items")[0].decode(Int.self, at: 0) == 0, "abandoned claims are not attempts")

        // 2. The default grace (30 s): the in-flight batches finish and are committed.
        let graceful = try await claimsThen { p, _ in Harness.signalAndWait(p, SIGTERM) }
        #expect(graceful.ended.result.status == 75, "\(graceful.ended.result.stderr.suffix(300))")
        #expect(graceful.ended.result.stderr.contains("resumable: run 1 (stopped: signal)"))
        #expect(graceful.ended.result.stderr.contains("finishing in-flight work"))
        let afterGraceful = try items()
        #expect(afterGraceful["claimed"] == nil, "\(afterGraceful)")
        #expect((afterGraceful["done"] ?? 0) >= graceful.claimed && graceful.claimed > 0, "in flight at the signal: \(graceful.claimed), after: \(afterGraceful)")
        #expect(try runStatus() == "interrupted")
        print("SIGTERM: \(graceful.claimed) items in flight committed; exit \(String(format: "%.1f", graceful.ended.afterSignal)) s after the signal")

        // 3. A second signal exits at once, without waiting for the in-flight answers.
        let impatient = try await claimsThen { p, _ in
            p.signal(SIGTERM)
            _ = p.waitForStderrBlocking(containing: "finishing in-flight work", timeout: 30)
            return Harness.signalAndWait(p, SIGTERM)
        }
        #expect(impatient.ended.result.status == 75)
        #expect(impatient.ended.result.stderr.contains("finishing in-flight work"))
        #expect(impatient.ended.result.stderr.contains("exiting at once"))
        #expect(impatient.ended.afterSignal < 2, "the second signal took \(impatient.ended.afterSignal) s")
        #expect((try items()["claimed"] ?? 0) > 0, "a process that exits at once leaves its claims for the next run")
        #expect(try await OwnThread.run { try Harness.waitForNoAdvisoryLocks(world.db) })

        // 4. --max-duration: the time budget ends the run like a signal (its claims from 3 come back at once).
        let budgetedResult = try await CLIRunner.run(args + ["--max-duration", "1s"], environment: world.env)
        #expect(budgetedResult.status == 75, "\(budgetedResult.stderr.suffix(300))")
        #expect(budgetedResult.stderr.contains("resumable: run 1 (stopped: time budget (--max-duration) used up)"), "\(budgetedResult.stderr.suffix(300))")
        #expect(try items()["claimed"] == nil)
        #expect(try runStatus() == "interrupted")

        // 5. The next run resumes and finishes the night.
        let final = try await CLIRunner.run(["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "48", "--batch-size", "16"] + Self.fast, environment: world.env)
        #expect(final.status == 0, "\(final.stderr.suffix(300))")
        #expect(final.stdout.contains("run 1 done: 48 due, 48 polled, 0 failed"), "\(final.stdout)")
        #expect(try db.query("SELECT count(*) FROM churnwatch.runs")[0].decode(Int.self, at: 0) == 1)
    }

    @Test("PostgreSQL stopped and started again mid-run, and the run's connections terminated twice: the run waits, reconnects and finishes like an uninterrupted one")
    func postgresGoesAway() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 300, seed: 33, start: Self.iso(Self.start), extra: ["--latency-ms", "10"])
        defer { sim.stop() }
        let reference = try await OwnThread.run { try Harness.database(sim: sim) }
        defer { reference.db.drop() }
        let terminated = try await OwnThread.run { try Harness.clone(reference, sim: sim) }
        defer { terminated.db.drop() }
        #expect(try await Harness.night(Self.start, sim: sim, env: reference.env, extra: Self.fast).status == 0)
        let args = ["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "4", "--batch-size", "2"] + Self.fast

        // A cluster of its own, so stopping it disturbs no other test.
        let cluster = try await OwnThread.run { try PrivateCluster.start() }
        defer { cluster.destroy() }
        var clusterEnv = sim.environment
        clusterEnv["DATABASE_URL"] = cluster.url
        let env = clusterEnv
        #expect(try await CLIRunner.run(["migrate"], environment: env).status == 0)
        #expect(try await CLIRunner.run(["import", sim.subscriptionsCSV.path], environment: env).status == 0)
        let db = try PostgresConnection(connectionString: cluster.url, logger: .postgres)
        let result = try await OwnThread.run { () throws -> CLIRunner.Result in
            let run = try RunningCLI(args, environment: env)
            _ = try Harness.waitUntil(timeout: 60) { try Harness.finished(db) >= 60 || !run.process.isRunning }
            try cluster.stop()
            let noticed = run.waitForStderrBlocking(containing: "PostgreSQL unavailable: retrying", timeout: 60)
            try cluster.startAgain()
            var result = run.waitBlocking()
            if !noticed { result.stderr += "\n(test: the run never said PostgreSQL was unavailable)" }
            return result
        }
        #expect(!result.stderr.contains("(test: the run never said"), "\(result.stderr.suffix(300))")
        #expect(result.status == 0, "\(result.stderr.suffix(500))")
        #expect(result.stdout.contains("run 1 done: 300 due, 300 polled, 0 failed"), "\(result.stdout)")
        #expect(result.stderr.contains("took this process's locks again"), "the run lock was taken again after the restart")
        let restarted = try PostgresConnection(connectionString: cluster.url, logger: .postgres)
        try Harness.expectSameEndState(restarted, try PostgresConnection(connectionString: reference.db.connectionURL, logger: .postgres), label: "restart")

        // The same through pg_terminate_backend on the shared cluster: every connection of the
        // run (its pool and its lock connection) cut, twice.
        let tdb = try PostgresConnection(connectionString: terminated.db.connectionURL, logger: .postgres)
        let terminatedEnv = terminated.env
        let name = terminated.db.name
        let (victimResult, cuts) = try await OwnThread.run { () throws -> (CLIRunner.Result, Int) in
            let victim = try RunningCLI(args, environment: terminatedEnv)
            var cuts = 0
            for threshold in [60, 150] {
                _ = try Harness.waitUntil(timeout: 60) { try Harness.finished(tdb) >= threshold || !victim.process.isRunning }
                cuts += try tdb.query("""
                    SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
                    WHERE datname = \(name) AND pid <> pg_backend_pid()
                    """)[0].decode(Int.self, at: 0)
            }
            return (victim.waitBlocking(), cuts)
        }
        #expect(victimResult.status == 0, "\(victimResult.stderr.suffix(500))")
        #expect(victimResult.stdout.contains("run 1 done: 300 due, 300 polled, 0 failed"))
        #expect(cuts >= 4, "connections terminated: \(cuts)")
        try Harness.expectSameEndState(terminated.db, reference.db, label: "terminated")
    }

    @Test("Apple down mid-run for longer than the retry budget: exit 75; with the simulator back at the same address the next run resumes and finishes like an uninterrupted one")
    func appleGoesAway() async throws {
        let flags = ["--latency-ms", "10"]
        let first = try await SimulatorProcess.start(subscribers: 300, seed: 34, start: Self.iso(Self.start), extra: flags)
        var firstStopped = false
        defer { if !firstStopped { first.stop() } }
        let reference = try await OwnThread.run { try Harness.database(sim: first) }
        defer { reference.db.drop() }
        let outage = try await OwnThread.run { try Harness.clone(reference, sim: first) }
        defer { outage.db.drop() }
        #expect(try await Harness.night(Self.start, sim: first, env: reference.env, extra: Self.fast).status == 0)

        // One retry per call, so the outage threshold (40 unanswered polls in a row) comes quickly.
        var env = outage.env
        env["APPSTORE_MAX_ATTEMPTS"] = "2"
        env["APPSTORE_MAX_RETRY_WAIT"] = "2"
        let db = try PostgresConnection(connectionString: outage.db.connectionURL, logger: .postgres)
        let args = ["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--concurrency", "8", "--batch-size", "4"] + Self.fast
        let ports = first.ports
        let runEnv = env
        let result = try await OwnThread.run { () throws -> CLIRunner.Result in
            let run = try RunningCLI(args, environment: runEnv)
            _ = try Harness.waitUntil(timeout: 60) {
                try db.query("SELECT count(*) FROM churnwatch.run_items WHERE status = 'done'")[0].decode(Int.self, at: 0) >= 60 || !run.process.isRunning
            }
            first.stop(keepingFiles: true)
            return run.waitBlocking()
        }
        firstStopped = true
        #expect(result.status == 75, "\(result.stderr.suffix(500))")
        #expect(result.stderr.contains("resumable: run 1 (Apple unavailable: unavailable:"), "\(result.stderr.suffix(300))")
        let unavailable = try db.query("SELECT count(*) FROM churnwatch.run_items WHERE outcome LIKE 'unavailable:%'")[0].decode(Int.self, at: 0)
        #expect(unavailable >= 40)
        #expect(try db.query("SELECT status FROM churnwatch.runs WHERE id = 1")[0].decode(String.self, at: 0) == "interrupted")

        // The simulator comes back at the same address with the same keys and population.
        let directory = first.directory
        let second = try await OwnThread.run {
            try SimulatorProcess.startBlocking(subscribers: 300, seed: 34, start: Self.iso(Self.start), extra: flags, ports: ports, directory: directory)
        }
        defer { second.stop() }
        try second.setClock(Self.iso(Self.start))
        let resumed = try await CLIRunner.run(args, environment: env)
        #expect(resumed.status == 0, "\(resumed.stderr.suffix(500))")
        #expect(resumed.stdout.contains("run 1 done: 300 due, 300 polled, 0 failed"), "\(resumed.stdout)")
        try Harness.expectSameEndState(outage.db, reference.db)
    }
}
