import Foundation
import Postgres
import Testing

/// Issue 40, items 3 and 4: `--app` naming no app of the database, and `apps add|set` given what
/// is not a key, two key settings at once, or another spelling of an app already there. Each is
/// refused in one line (78) before anything is written.
@Suite("apps and --app on bad input (the binary)")
struct AppsInputCLITests {
    static let deployment = "com.example.churnwatch"
    static let second = "com.example.churnwatch.app2"

    /// A migrated database holding the deployment's app and a second one.
    static func twoApps() async throws -> (ScratchDatabase, [String: String]) {
        let db = try await InputFaultsCLITests.migrated()
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": deployment]
        let add = try await CLIRunner.run(["apps", "add", second, "--app-apple-id", "4040010"], environment: env)
        guard add.status == 0 else { db.drop(); throw CLITestError("apps add: \(add.stderr)") }
        return (db, env)
    }

    static func count(_ db: ScratchDatabase, _ sql: String) throws -> Int {
        let c = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        return try c.query(PostgresQuery(stringLiteral: sql))[0].decode(Int.self, at: 0)
    }

    @Test("every command that takes --app refuses an app not in churnwatch.apps, one line, 78, nothing written (item 3)")
    func unknownApp() async throws {
        let (db, env) = try await Self.twoApps()
        defer { db.drop() }
        let unknown = ["--app", "com.unknown.app"]
        let commands: [[String]] = [
            ["winback", "claim", "--campaign", "save_offer", "--consumer", "mailer"], ["winback", "list"],
            ["offers", "list"], ["offers", "remove", "--campaign", "save_offer"],
            ["offers", "set", "--campaign", "save_offer", "--offer-id", "x"],
            ["backfill", "--all", "--dry-run"], ["segments"], ["status"], ["outcomes"], ["refunds"], ["plan"], ["report", "--out", "/dev/null"],
        ]
        for command in commands {
            let r = try await CLIRunner.run(command + unknown, environment: env)
            #expect(r.status == 78, "\(command.prefix(2)): \(r.status) \(r.stdout.prefix(200)) \(r.stderr.prefix(300))")
            #expect(r.stderr.contains("--app com.unknown.app is not an app of this database"), "\(command.prefix(2)): \(r.stderr.prefix(300))")
            InputFaultsCLITests.oneLine(r)
        }
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.offers") == 0, "offers set wrote a row for an app that does not exist")
        // Bundle ids compare without case, as Apple's do: another spelling names the same app.
        let listed = try await CLIRunner.run(["offers", "set", "--app", Self.second.uppercased(), "--campaign", "save_offer", "--offer-id", "x"],
                                             environment: env)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.offers WHERE bundle_id = '\(Self.second)'") == 1,
                "the row is the app's, in the database's spelling")
    }

    @Test("apps add|set check the key file as a run reads it, refuse --deployment-key beside a key, and refuse another spelling of an app (item 4)")
    func badKeysAndLookalikes() async throws {
        let (db, env) = try await Self.twoApps()
        defer { db.drop() }
        let dir = try MetricsTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let text = dir.appendingPathComponent("hostname")
        try "not a key\n".write(to: text, atomically: true, encoding: .utf8)
        let ownKey = ["--issuer-id", "57246542-96fe-1a63-e053-0824d011072a", "--key-id", "ABCDEFGHIJ"]
        for (path, says) in [(dir.path, "a directory, not a file"), (text.path, "is not a PEM file"), (dir.appendingPathComponent("none.p8").path, "no such file")] {
            for verb in ["add", "set"] {
                let name = verb == "add" ? "com.example.third" : Self.second
                let r = try await CLIRunner.run(["apps", verb, name, "--app-apple-id", "4040011"] + ownKey + ["--key-file", path], environment: env)
                #expect(r.status == 78 && r.stderr.contains("--key-file") && r.stderr.contains(says), "\(verb) \(path): \(r.status) \(r.stderr)")
                InputFaultsCLITests.oneLine(r)
            }
        }
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.apps WHERE key_file IS NOT NULL OR bundle_id = 'com.example.third'") == 0)

        let both = try await CLIRunner.run(["apps", "set", Self.second, "--deployment-key"] + ownKey + ["--key-env", "SOME_KEY"], environment: env)
        #expect(both.status == 78 && both.stderr.contains("--deployment-key"), "\(both.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.apps WHERE key_env IS NOT NULL") == 0)

        let twin = try await CLIRunner.run(["apps", "add", Self.second.uppercased(), "--app-apple-id", "4040012"], environment: env)
        #expect(twin.status == 78 && twin.stderr.contains("is the app \(Self.second)"), "\(twin.stderr)")
        InputFaultsCLITests.oneLine(twin)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.apps") == 2)
        // The table holds it too, whoever writes it (migration 0020).
        let c = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        #expect(throws: (any Error).self) {
            try c.execute("INSERT INTO churnwatch.apps (bundle_id, app_apple_id) VALUES ('COM.EXAMPLE.CHURNWATCH.APP2', 1)")
        }
        // set names the app in any spelling, and keeps the database's.
        let set = try await CLIRunner.run(["apps", "set", Self.second.uppercased(), "--history-rate", "7"], environment: env)
        #expect(set.status == 0 && set.stdout.contains("app changed: \(Self.second) "), "\(set.stdout) \(set.stderr)")
    }
}
