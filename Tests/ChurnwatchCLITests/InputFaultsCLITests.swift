import Foundation
import Postgres
import Testing

/// Issue 18 items 5, 7 and 11: settings and command lines that crashed churnwatch, exited with
/// the wrong code or said something unclear. Each is one line on stderr with the documented code.
@Suite("churnwatch on bad settings and command lines (the binary)")
struct InputFaultsCLITests {
    static func oneLine(_ r: CLIRunner.Result, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr.prefix(2000))", sourceLocation: sourceLocation)
    }

    static func migrated() async throws -> ScratchDatabase {
        let db = try ScratchDatabase.create()
        let migrate = try await CLIRunner.run(["migrate"], environment: ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"])
        guard migrate.status == 0 else { db.drop(); throw CLITestError("migrate failed: \(migrate.stderr)") }
        return db
    }

    @Test("a window too long to compute with is one line naming the flag, exit 78, not a crash (item 5)")
    func hugeWindow() async throws {
        let db = try await Self.migrated()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        for flag in ["--end-window", "--start-window", "--lapsed-window", "--stale-after"] {
            let r = try await CLIRunner.run(["plan", flag, "99999999999d"], environment: env)
            #expect(r.status == 78, "\(flag): \(r.status) \(r.stderr.prefix(500))")
            #expect(r.stderr.contains(flag) && r.stderr.contains("maximum"), "\(r.stderr.prefix(500))")
            Self.oneLine(r)
        }
        let fromEnv = try await CLIRunner.run(["plan"], environment: env.merging(["CHURNWATCH_END_WINDOW": "1e300d"]) { $1 })
        #expect(fromEnv.status == 78)
        #expect(fromEnv.stderr.contains("CHURNWATCH_END_WINDOW"), "\(fromEnv.stderr)")
        let rate = try await CLIRunner.run(["plan", "--status-rate", "1e-300"], environment: env)
        #expect(rate.status == 0, "an absurd rate gives an absurd ETA, not a crash: \(rate.stderr.prefix(300))")
    }

    @Test("negative durations and ids say so instead of \"Missing value\" (item 11)")
    func negativeValues() async throws {
        let env = ["DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"]
        let lease = try await CLIRunner.run(["winback", "claim", "--campaign", "save_offer", "--consumer", "m", "--lease", "-5m"], environment: env)
        #expect(lease.status == 78)
        #expect(lease.stderr.contains("--lease") && lease.stderr.contains("negative"), "\(lease.stderr)")
        #expect(!lease.stderr.contains("Missing value"))
        Self.oneLine(lease)
        let ack = try await CLIRunner.run(["winback", "ack", "-5"], environment: env)
        #expect(ack.status == 78)
        #expect(ack.stderr.contains("must be positive") && ack.stderr.contains("-5"), "\(ack.stderr)")
        Self.oneLine(ack)
        let unknown = try await CLIRunner.run(["winback", "release", "3", "--frobnicate"], environment: env)
        #expect(unknown.status == 64, "\(unknown.stderr)")
        let window = try await CLIRunner.run(["plan", "--end-window", "-1d"], environment: env)
        #expect(window.status == 78)
        #expect(window.stderr.contains("--end-window") && window.stderr.contains("negative"), "\(window.stderr)")
    }

    @Test("plan and import before migrate say to run migrate, exit 78 (item 7)")
    func notMigrated() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID()).csv")
        defer { try? FileManager.default.removeItem(at: file) }
        try "original_transaction_id\n5000001\n".write(to: file, atomically: true, encoding: .utf8)
        for args in [["plan"], ["import", file.path]] {
            let r = try await CLIRunner.run(args, environment: env)
            #expect(r.status == 78, "\(args): \(r.stderr)")
            #expect(r.stderr.contains("run `churnwatch migrate` first"), "\(r.stderr)")
            Self.oneLine(r)
        }
    }

    @Test("a malformed DATABASE_URL is 78 naming it, never echoing a password; an unknown user is 69 naming it (item 7)")
    func databaseURL() async throws {
        for url in ["postgresql://u:s3cret@127.0.0.1:notaport/db", "not a url", "mysql://u:s3cret@127.0.0.1/db", "host=127.0.0.1 port=99999"] {
            let r = try await CLIRunner.run(["plan"], environment: ["DATABASE_URL": url])
            #expect(r.status == 78, "\(url): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("DATABASE_URL"), "\(r.stderr)")
            #expect(!r.stderr.contains("s3cret"))
            Self.oneLine(r)
        }
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        var url = db.connectionURL
        if var c = URLComponents(string: url), url.hasPrefix("postgres") {
            c.user = "churnwatch_no_such_role"
            url = c.string ?? url
        } else {
            url += " user=churnwatch_no_such_role"
        }
        let r = try await CLIRunner.run(["plan"], environment: ["DATABASE_URL": url])
        #expect(r.status == 69, "\(r.stderr)")
        #expect(r.stderr.contains("DATABASE_URL"), "\(r.stderr)")
        Self.oneLine(r)
    }

    @Test("a schema migrated by a newer build: migrate refuses (not \"up to date\"), --status says so in full, plan refuses (item 7, 11)")
    func newerSchema() async throws {
        let db = try await Self.migrated()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        try PostgresConnection(connectionString: db.connectionURL, logger: .postgres).execute(
            "INSERT INTO churnwatch.schema_migrations (name, checksum) VALUES ('9999_from_the_future.sql', 'x')")
        let migrate = try await CLIRunner.run(["migrate"], environment: env)
        #expect(migrate.status == 78, "\(migrate.stdout) \(migrate.stderr)")
        #expect(!migrate.stdout.contains("up to date"))
        #expect(migrate.stderr.contains("9999_from_the_future.sql") && migrate.stderr.contains("not in this build"), "\(migrate.stderr)")
        Self.oneLine(migrate)
        let status = try await CLIRunner.run(["migrate", "--status"], environment: env)
        #expect(status.stdout.contains("not in this build 9999_from_the_future.sql"), "\(status.stdout)")
        let plan = try await CLIRunner.run(["plan"], environment: env)
        #expect(plan.status == 78)
        #expect(plan.stderr.contains("not in this build"), "\(plan.stderr)")
        Self.oneLine(plan)
    }

    @Test("a directory given to import is named as such, exit 65 (item 11)")
    func importDirectory() async throws {
        let db = try await Self.migrated()
        defer { db.drop() }
        let dir = FileManager.default.temporaryDirectory.path
        let r = try await CLIRunner.run(["import", dir], environment: ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"])
        #expect(r.status == 65)
        #expect(r.stderr.contains("is a directory"), "\(r.stderr)")
        #expect(!r.stderr.contains("NSCocoaErrorDomain"))
        Self.oneLine(r)
    }

    @Test("a NUL byte or a bad id rejects its line only; the rest is imported; binary headers are not echoed (items 6, 8, 11)")
    func importBadLines() async throws {
        let db = try await Self.migrated()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID()).csv")
        defer { try? FileManager.default.removeItem(at: file) }
        var bytes = Array("original_transaction_id,customer_ref\n5000001,a\n5000002,a".utf8) + [0]
        bytes += Array("b\nabc,c\n5000003,d\n".utf8)
        try Data(bytes).write(to: file)
        let r = try await CLIRunner.run(["import", file.path], environment: env)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("imported 2 new subscriptions"), "\(r.stdout)")
        #expect(r.stderr.contains("line 3: field 2 holds a NUL byte") && r.stderr.contains("line 4:"), "\(r.stderr)")

        var binary = Array("original_transaction_id,".utf8)
        binary += (0..<3_000_000).map { UInt8(truncatingIfNeeded: ($0 &* 7919) >> 3) }.map { $0 == 0x0A ? 0x41 : $0 }
        try Data(binary).write(to: file)
        let echoed = try await CLIRunner.run(["import", file.path], environment: env)
        #expect(echoed.status == 65)
        #expect(echoed.stderr.utf8.count < 400, "\(echoed.stderr.prefix(400))")
        Self.oneLine(echoed)
    }
}

/// Issue 18 items 5, 7 and 11 with a simulator: `run`'s own settings and endings.
@Suite("churnwatch run on bad settings and bad answers (the binary)", .serialized)
struct RunFaultsCLITests {
    typealias World = NightlyRunEndToEndTests.World
    static let start = NightlyRunEndToEndTests.start
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }

    static func count(_ world: World, _ sql: String) throws -> Int {
        try world.connect().query(PostgresQuery(stringLiteral: sql))[0].decode(Int.self, at: 0)
    }

    @Test("a base URL with an impossible port is 78 at configuration load, before anything is written (item 5)")
    func impossiblePort() async throws {
        let world = try await World.make(subscribers: 20, seed: 51)
        defer { world.close() }
        var env = world.env
        env["APPSTORE_BASE_URL"] = "http://127.0.0.1:99999"
        let r = try await CLIRunner.run(["run", "--as-of", Self.iso(Self.start)], environment: env)
        #expect(r.status == 78, "\(r.status) \(r.stderr.suffix(500))")
        #expect(r.stderr.contains("APPSTORE_BASE_URL") && r.stderr.contains("99999"), "\(r.stderr)")
        InputFaultsCLITests.oneLine(r)
        #expect(try Self.count(world, "SELECT count(*)::int FROM churnwatch.runs") == 0)
    }

    @Test("run refuses a schema migrated by a newer build, before planning (item 7)")
    func newerSchema() async throws {
        let world = try await World.make(subscribers: 20, seed: 52)
        defer { world.close() }
        try world.connect().execute("INSERT INTO churnwatch.schema_migrations (name, checksum) VALUES ('9999_from_the_future.sql', 'x')")
        let r = try await world.night(Self.start)
        #expect(r.status == 78, "\(r.stderr.suffix(500))")
        #expect(r.stderr.contains("not in this build"), "\(r.stderr)")
        #expect(try Self.count(world, "SELECT count(*)::int FROM churnwatch.runs") == 0)
    }

    @Test("a run in which every poll failed does not exit 0 (item 7)")
    func everyPollFailed() async throws {
        let world = try await World.make(subscribers: 20, seed: 53,
                                         simFlags: ["--fault-rate", "1", "--fault-kinds", "rogue_chain", "--receipt-share", "0"])
        defer { world.close() }
        let r = try await world.night(Self.start, extra: ["--status-rate", "1000", "--history-rate", "1000"])
        #expect(r.status == 69, "\(r.status) \(r.stdout) \(r.stderr.suffix(500))")
        #expect(r.stdout.contains("0 polled, 20 failed"), "\(r.stdout)")
        #expect(r.stderr.contains("every poll of run 1 failed"), "\(r.stderr.suffix(500))")
    }

    @Test("a run that starts while another process holds the run lock but has no run yet says so, not \"run ?\" (item 11)")
    func anotherRunStillPlanning() async throws {
        let world = try await World.make(subscribers: 20, seed: 54)
        defer { world.close() }
        let holder = try world.connect()
        try holder.advisoryLock(PostgresAdvisoryLockKey.named("churnwatch.run.nightly.com.example.churnwatch"))
        let r = try await world.night(Self.start)
        #expect(r.status == 0, "\(r.stderr.suffix(500))")
        #expect(r.stdout.contains("another run is in progress: its process is still planning it"), "\(r.stdout)")
        #expect(!r.stdout.contains("?"))
    }
}
