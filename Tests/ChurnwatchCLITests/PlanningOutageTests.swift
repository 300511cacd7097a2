import Foundation
import Postgres
import Testing

/// A PostgreSQL outage while a run plans is ridden out like one while it polls (issue 18, item 7).
@Suite("PostgreSQL going away while a run plans", .serialized)
struct PlanningOutageTests {
    static let start = NightlyRunEndToEndTests.start
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }

    @Test("every connection of a planning run terminated (its run lock with them): it reconnects, takes its lock again, plans once and finishes")
    func terminatedWhilePlanning() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 120, seed: 41, start: Self.iso(Self.start))
        defer { sim.stop() }
        let world = try await OwnThread.run { try Harness.database(sim: sim) }
        defer { world.db.drop() }
        try sim.setClock(Self.iso(Self.start))
        let name = world.db.name, env = world.env
        let args = ["run", "--as-of", Self.iso(Self.start), "--log-format", "json", "--status-rate", "5000", "--history-rate", "5000"]

        let (result, cut) = try await OwnThread.run { () throws -> (CLIRunner.Result, Int) in
            // Planning reads churnwatch.runs first: a lock on it holds the run inside planning,
            // however fast the machine, until every connection of the run has been cut.
            let blocker = try PostgresConnection(connectionString: world.db.connectionURL, logger: .postgres)
            try blocker.execute("BEGIN")
            try blocker.execute("LOCK TABLE churnwatch.runs IN ACCESS EXCLUSIVE MODE")
            let run = try RunningCLI(args, environment: env)
            // Another session watches: inside the blocker's transaction pg_stat_activity would be
            // the snapshot of its first read.
            let watcher = try PostgresConnection(connectionString: world.db.connectionURL, logger: .postgres)
            let waiting = try Harness.waitUntil(timeout: 60) {
                try watcher.query("""
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = \(name) AND pid <> pg_backend_pid() AND pid <> \(blocker.backendPID) AND wait_event_type = 'Lock'
                    """)[0].decode(Int.self, at: 0) > 0 || !run.process.isRunning
            }
            var cut = 0
            if waiting {
                cut = try blocker.query("""
                    SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
                    WHERE datname = \(name) AND pid <> pg_backend_pid() AND pid <> \(watcher.backendPID)
                    """)[0].decode(Int.self, at: 0)
            }
            try blocker.execute("ROLLBACK")
            return (run.waitBlocking(), cut)
        }
        #expect(cut >= 2, "the planning connection and the lock connection were cut: \(cut)")
        #expect(result.status == 0, "\(result.stderr.suffix(600))")
        #expect(result.stderr.contains("PostgreSQL unavailable: retrying") && result.stderr.contains("\"operation\":\"plan\""),
                "the outage was noticed while planning: \(result.stderr.suffix(600))")
        #expect(result.stderr.contains("took this process's locks again"), "the run lock was taken again")
        let db = try PostgresConnection(connectionString: world.db.connectionURL, logger: .postgres)
        let runs = try db.query("SELECT count(*), min(status), sum(due), sum(polled), sum(failed) FROM churnwatch.runs")[0]
        #expect(try runs.decode(Int.self, at: 0) == 1, "planned once")
        #expect(try runs.decode(String.self, at: 1) == "done")
        #expect(try runs.decode(Int.self, at: 2) == 120 && runs.decode(Int.self, at: 3) == 120 && runs.decode(Int.self, at: 4) == 0)
        #expect(result.stdout.contains("run 1 done: 120 due, 120 polled, 0 failed"), "\(result.stdout)")
    }
}
