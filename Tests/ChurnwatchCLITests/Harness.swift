import Foundation
import Postgres
import Testing

/// Shared by the crash, outage and backfill tests.
enum Harness {
    struct Database {
        var db: ScratchDatabase
        var env: [String: String]
    }

    /// A migrated database on the test cluster with the simulator's subscribers imported. Blocking.
    static func database(sim: SimulatorProcess) throws -> Database {
        let db = try ScratchDatabase.create()
        var env = sim.environment
        env["DATABASE_URL"] = db.connectionURL
        do {
            let migrate = try CLIRunner.runBlocking(["migrate"], environment: env)
            guard migrate.status == 0 else { throw CLITestError("migrate failed: \(migrate.stderr)") }
            let imported = try CLIRunner.runBlocking(["import", sim.subscriptionsCSV.path], environment: env)
            guard imported.status == 0 else { throw CLITestError("import failed: \(imported.stderr)") }
        } catch {
            db.drop()
            throw error
        }
        return Database(db: db, env: env)
    }

    /// A copy of `source` (which nobody may be connected to) as a new database. Blocking.
    static func clone(_ source: Database, sim: SimulatorProcess) throws -> Database {
        let name = "cw_cli_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        let admin = try PostgresConnection(connectionString: source.db.server, logger: .postgres)
        // The backends of the commands that just exited may take a moment to go.
        let deadline = Date().addingTimeInterval(30)
        while true {
            do {
                try admin.execute("CREATE DATABASE \(identifier: String(name)) TEMPLATE \(identifier: source.db.name)")
                break
            } catch let error as PostgresError where error.message.contains("being accessed by other users") && Date() < deadline {
                usleep(20_000)
            }
        }
        let db = ScratchDatabase(name: String(name), server: source.db.server)
        var env = source.env
        env["DATABASE_URL"] = db.connectionURL
        return Database(db: db, env: env)
    }

    /// `churnwatch run` for one simulated night (the simulator's clock set to it first).
    static func night(_ asOf: Date, sim: SimulatorProcess, env: [String: String], extra: [String] = []) async throws -> CLIRunner.Result {
        try await OwnThread.run {
            try sim.setClock(NightlyRunEndToEndTests.iso(asOf))
            return try CLIRunner.runBlocking(["run", "--as-of", NightlyRunEndToEndTests.iso(asOf), "--log-format", "json"] + extra, environment: env)
        }
    }

    /// Checks `condition` until it holds or `timeout` passes (waiting on database state or a
    /// process, never on time alone). True when it held. Blocking: call it inside `OwnThread.run`,
    /// together with what must happen right after (a kill, a stop), so that nothing waits for
    /// a cooperative thread in between.
    static func waitUntil(timeout: TimeInterval, _ condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(5_000)
        }
        return try condition()
    }

    /// Waits until no session holds an advisory lock in `db`: the backends of a killed
    /// process are gone (as they are long before the next cron firing). Blocking.
    static func waitForNoAdvisoryLocks(_ db: ScratchDatabase) throws -> Bool {
        let admin = try PostgresConnection(connectionString: db.server, logger: .postgres)
        return try waitUntil(timeout: 30) {
            try admin.query("""
                SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                WHERE l.locktype = 'advisory' AND d.datname = \(db.name)
                """)[0].decode(Int.self, at: 0) == 0
        }
    }

    /// Items of `run` with a final outcome.
    static func finished(_ db: PostgresConnection, run: Int64? = nil) throws -> Int {
        if let run {
            return try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(run) AND status IN ('done', 'failed')")[0].decode(Int.self, at: 0)
        }
        return try db.query("SELECT count(*) FROM churnwatch.run_items WHERE status IN ('done', 'failed')")[0].decode(Int.self, at: 0)
    }

    /// What a background process ended with.
    struct Ended: Sendable {
        var result: CLIRunner.Result
        /// Ended by a signal it did not handle (kill -9), not by exiting.
        var bySignal: Bool
        /// Seconds from the last signal sent to the exit.
        var afterSignal: TimeInterval
    }

    /// Sends `sig` and waits for the exit. Blocking.
    static func signalAndWait(_ process: RunningCLI, _ sig: Int32) -> Ended {
        let sent = Date()
        process.signal(sig)
        let result = process.waitBlocking()
        return Ended(result: result, bySignal: result.bySignal, afterSignal: Date().timeIntervalSince(sent))
    }

    /// What the retention team reads, in a comparable form (no ids, no detection times).
    static func endState(_ db: PostgresConnection) throws -> [(String, [String])] {
        func rows(_ sql: String) throws -> [String] {
            try db.query(PostgresQuery(stringLiteral: sql)).map { try $0.decode(String.self, at: 0) }
        }
        return [
            ("events (otid, event, occurred_at)", try rows("""
                SELECT concat_ws(' ', original_transaction_id, event, occurred_at::text) FROM churnwatch.churn_events ORDER BY 1
                """)),
            ("segments", try rows("""
                SELECT concat_ws(' ', original_transaction_id, segment, segment_since::text, product_id, expires_at::text, auto_renew::text,
                                 in_billing_retry::text, grace_period_expires_at::text, expiration_intent::text, revocation_reason::text)
                FROM churnwatch.subscription_segments ORDER BY 1
                """)),
            ("win-back entries (otid, campaign, episode, status)", try rows("""
                SELECT concat_ws(' ', original_transaction_id, campaign, episode, status, not_before::text, expires_at::text)
                FROM churnwatch.winback_queue ORDER BY 1
                """)),
            ("snapshots", try rows("""
                SELECT original_transaction_id || ' ' || coalesce(snapshot::text, '-') || ' ' || coalesce(state, '-')
                FROM churnwatch.subscriptions ORDER BY 1
                """)),
            ("transactions", try rows("""
                SELECT concat_ws(' ', transaction_id, original_transaction_id, product_id, expires_date::text, revocation_date::text)
                FROM churnwatch.transactions ORDER BY 1
                """)),
            ("segment_daily", try rows("""
                SELECT concat_ws(' ', day::text, segment, product_id, subscriptions::text) FROM churnwatch.segment_daily ORDER BY 1
                """)),
        ]
    }

    static func expectSameEndState(_ a: ScratchDatabase, _ b: ScratchDatabase, label: String = "",
                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectSameEndState(try PostgresConnection(connectionString: a.connectionURL, logger: .postgres), try PostgresConnection(connectionString: b.connectionURL, logger: .postgres),
                               label: label, sourceLocation: sourceLocation)
    }

    static func expectSameEndState(_ a: PostgresConnection, _ b: PostgresConnection, label: String = "",
                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        let (left, right) = (try endState(a), try endState(b))
        var summary: [String] = []
        for ((name, l), (_, r)) in zip(left, right) {
            summary.append("\(name) \(l.count)")
            let onlyLeft = l.filter { !Set(r).contains($0) }
            let onlyRight = r.filter { !Set(l).contains($0) }
            #expect(l == r, "\(label) \(name): \(l.count) vs \(r.count) rows; only interrupted: \(onlyLeft.prefix(3)); only uninterrupted: \(onlyRight.prefix(3))",
                    sourceLocation: sourceLocation)
        }
        print("same end state \(label): \(summary.joined(separator: ", "))")
    }

    /// SplitMix64: reproducible random moments from a printed seed.
    static func next(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A PostgreSQL cluster of a test's own (ops/pg with a data directory of its own), to stop
/// and start without disturbing tests that share the suite's cluster.
struct PrivateCluster {
    let directory: String
    let url: String

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ops/pg").path
    }

    static func start() throws -> PrivateCluster {
        let dir = "/tmp/cw-test-pg-\(UUID().uuidString.prefix(8).lowercased())"
        let out = try pg("start", directory: dir)
        return PrivateCluster(directory: dir, url: out.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// `pg_ctl stop -m fast`: every backend is terminated, new connections are refused.
    func stop() throws { _ = try Self.pg("stop", directory: directory) }

    func startAgain() throws { _ = try Self.pg("start", directory: directory) }

    func destroy() { _ = try? Self.pg("destroy", directory: directory) }

    /// Runs `ops/pg COMMAND` and returns what it printed.
    ///
    /// Not through `Process`: on Linux it learns that a child exited when a socket it hands to
    /// the child closes, and the server `pg_ctl` leaves running inherits that socket, so
    /// `waitUntilExit` would never return (swift-corelibs-foundation issue 4795). Here the
    /// shell closes every inherited descriptor above stderr before running the script.
    @discardableResult
    static func pg(_ command: String, directory: String) throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("cw-pg-\(UUID().uuidString.prefix(8))").path
        let (outPath, errPath) = (base + ".out", base + ".err")
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let closeAndRun = #"for f in /proc/$$/fd/*; do f=${f##*/}; [ "$f" -gt 2 ] && eval "exec $f>&-"; done 2>/dev/null; exec /bin/bash "$0" "$1""#
        var env = ProcessInfo.processInfo.environment
        env["CHURNWATCH_PG_DIR"] = directory
        let words: [String] = ["/bin/bash", "-c", closeAndRun, script, command]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, argv, envp)
        guard spawned == 0 else { throw CLITestError("ops/pg \(command): posix_spawn failed (\(spawned))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            throw CLITestError("ops/pg \(command) failed: \((try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")")
        }
        return out
    }
}
