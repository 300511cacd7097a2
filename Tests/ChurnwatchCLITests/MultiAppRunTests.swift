import Foundation
import Postgres
import Testing

/// Issue 26: several apps in one database, one `run`. The simulator serves two apps under one
/// key (`--apps 2`); each app has its own bundle id, population, rate buckets and notification
/// history.
@Suite("several apps in one database (the binary)", .serialized)
struct MultiAppRunTests {
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]
    static let second = "com.example.churnwatch.app2"

    /// A database with the simulator's two apps registered and imported.
    static func twoApps(_ sim: SimulatorProcess) async throws -> Harness.Database {
        let db = try await OwnThread.run { try Harness.database(sim: sim) }
        let apps = try String(contentsOf: sim.directory.appendingPathComponent("pki/apps.tsv"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        let row = try #require(apps.first { $0.first == Self.second })
        let add = try await CLIRunner.run(["apps", "add", Self.second, "--app-apple-id", row[1]], environment: db.env)
        #expect(add.status == 0, "\(add.stderr)")
        let csv = sim.directory.appendingPathComponent("pki").appendingPathComponent(URL(fileURLWithPath: row[3]).lastPathComponent)
        let imported = try await CLIRunner.run(["import", "--app", Self.second, csv.path], environment: db.env)
        #expect(imported.status == 0, "\(imported.stderr)")
        return db
    }

    @Test("one run polls both apps, each over its own token and budget: every row names its app, each app's segments are its own truth, a run row per app")
    func oneRunTwoApps() async throws {
        // The population starts 45 days before the first night: each app's history has notifications to sync.
        let sim = try await SimulatorProcess.start(subscribers: 150, seed: 71, start: Self.iso(Self.start.addingTimeInterval(-45 * Self.day)),
                                                   extra: ["--apps", "2"])
        defer { sim.stop() }
        let db = try await Self.twoApps(sim)
        defer { db.db.drop() }
        let first = try #require(db.env["APPSTORE_BUNDLE_ID"])
        let c = try PostgresConnection(connectionString: db.db.connectionURL, logger: .postgres)
        let registered = try c.query("SELECT bundle_id, count(*) FROM churnwatch.subscriptions GROUP BY 1 ORDER BY 1")
            .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Int.self, at: 1))" }
        #expect(registered == ["\(first) 150", "\(Self.second) 150"])

        for night in 0..<2 {
            let at = Self.start.addingTimeInterval(Double(night) * Self.day)
            let r = try await Harness.night(at, sim: sim, env: db.env, extra: Self.fast + ["--stale-after", "20h", "--notifications", "on"])
            #expect(r.status == 0, "\(r.stderr.suffix(400))")
            #expect(r.stdout.contains("app \(first):\n") && r.stdout.contains("app \(Self.second):\n"), "\(r.stdout)")
            let done = r.stdout.split(separator: "\n").filter { $0.hasPrefix("run ") && $0.hasSuffix(" polled, 0 failed") }
            #expect(done.count == 2, "a finished run per app: \(r.stdout)")
            #expect(r.stdout.components(separatedBy: "change feed:").count == 3, "each app syncs its own history: \(r.stdout)")
            // Each app's polled subscriptions are in their own app's true segment.
            for app in [first, Self.second] {
                let truth = try sim.truth(at: Self.iso(at), bundleId: app)
                let segments = try c.query("""
                    SELECT original_transaction_id, segment FROM churnwatch.subscription_segments
                    WHERE bundle_id = \(app)
                    """).map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1)) }
                #expect(segments.count == 150, "\(app) night \(night): \(segments.count) polled")
                let wrong = segments.filter { otid, segment in
                    guard let t = truth[otid] else { return true }
                    return t.fault == nil && t.segment != segment
                }
                #expect(wrong.isEmpty, "\(app) night \(night): \(wrong.prefix(5))")
            }
        }
        let runs = try c.query("SELECT bundle_id, count(*) FILTER (WHERE status = 'done'), count(*) FROM churnwatch.runs GROUP BY 1 ORDER BY 1")
            .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Int.self, at: 1))/\(try $0.decode(Int.self, at: 2))" }
        #expect(runs == ["\(first) 2/2", "\(Self.second) 2/2"])
        // No row of one app's tables names the other app's subscription.
        for table in ["subscription_segments", "churn_events", "winback_queue", "notifications"] {
            let crossed = try c.query(PostgresQuery(stringLiteral: """
                SELECT count(*) FROM churnwatch.\(table) t JOIN churnwatch.subscriptions s USING (original_transaction_id)
                WHERE t.bundle_id <> s.bundle_id
                """))[0].decode(Int.self, at: 0)
            #expect(crossed == 0, "\(table): \(crossed) rows name another app than their subscription's")
        }
        let notified = try c.query("SELECT bundle_id, count(*) FROM churnwatch.notifications GROUP BY 1 ORDER BY 1")
            .map { try $0.decode(String.self, at: 0) }
        #expect(notified == [first, Self.second], "each app's feed synced its own history")
        let days = try c.query("SELECT count(DISTINCT bundle_id) FROM churnwatch.segment_daily")[0].decode(Int.self, at: 0)
        #expect(days == 2)
        let defaults = try c.query("SELECT bundle_id FROM churnwatch.apps WHERE is_default").map { try $0.decode(String.self, at: 0) }
        #expect(defaults == [first], "the deployment's app stays the default")
    }

    @Test("an app whose key Apple refuses does not stop the other: exit 75, the other's run done; with the key mended the next run resumes that app's run")
    func refusedKeyIsPartial() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 60, seed: 72, start: Self.iso(Self.start), extra: ["--apps", "2"])
        defer { sim.stop() }
        let db = try await Self.twoApps(sim)
        defer { db.db.drop() }
        let first = try #require(db.env["APPSTORE_BUNDLE_ID"])
        let key = try #require(db.env["APPSTORE_PRIVATE_KEY_PATH"]), issuer = try #require(db.env["APPSTORE_ISSUER_ID"])
        let wrong = try await CLIRunner.run(["apps", "set", Self.second, "--issuer-id", issuer, "--key-id", "NOTTHEKEY1", "--key-file", key],
                                            environment: db.env)
        #expect(wrong.status == 0, "\(wrong.stderr)")

        let refused = try await Harness.night(Self.start, sim: sim, env: db.env, extra: Self.fast)
        #expect(refused.status == 75, "\(refused.stdout) \(refused.stderr.suffix(400))")
        let blocks = refused.stdout.components(separatedBy: "app \(Self.second):\n")
        #expect(blocks.count == 2 && blocks[0].hasPrefix("app \(first):\nrun ") && blocks[0].contains(" done: 60 due, 60 polled, 0 failed\n"),
                "the first app's run finished: \(refused.stdout)")
        #expect(blocks.last?.contains(" done: ") == false, "the refused app's did not: \(refused.stdout)")
        #expect(refused.stderr.contains("churnwatch: app \(Self.second): Apple rejected the API key"), "\(refused.stderr.suffix(600))")
        #expect(refused.stderr.hasSuffix("1 of 2 apps did not finish: \(Self.second) (exit 78); the next run resumes them\n"),
                "\(refused.stderr.suffix(300))")
        let c = try PostgresConnection(connectionString: db.db.connectionURL, logger: .postgres)
        let unfinished = try c.query("SELECT id FROM churnwatch.runs WHERE bundle_id = \(Self.second) AND finished_at IS NULL")
        // Planned before its first call was refused: resumed, not planned again, by the next run.
        try #require(unfinished.count == 1)
        let run = try unfinished[0].decode(Int64.self, at: 0)

        let mended = try await CLIRunner.run(["apps", "set", Self.second, "--deployment-key"], environment: db.env)
        #expect(mended.status == 0, "\(mended.stderr)")
        let again = try await Harness.night(Self.start.addingTimeInterval(3600), sim: sim, env: db.env, extra: Self.fast)
        #expect(again.status == 0, "\(again.stderr.suffix(400))")
        #expect(again.stdout.contains("run \(run) done: 60 due, 60 polled"), "the refused app's run is resumed: \(again.stdout)")
        let polled = try c.query("SELECT count(*) FROM churnwatch.subscriptions WHERE bundle_id = \(Self.second) AND last_outcome = 'ok'")
        #expect(try polled[0].decode(Int.self, at: 0) == 60)
    }

    @Test("an app's own key in a variable (--key-env): unset, that app stops in one line naming the variable (78) and the other finishes; set to the PEM, both finish")
    func keyInAVariable() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 40, seed: 73, start: Self.iso(Self.start), extra: ["--apps", "2"])
        defer { sim.stop() }
        let db = try await Self.twoApps(sim)
        defer { db.db.drop() }
        let keyPath = try #require(db.env["APPSTORE_PRIVATE_KEY_PATH"])
        let set = try await CLIRunner.run(["apps", "set", Self.second, "--issuer-id", try #require(db.env["APPSTORE_ISSUER_ID"]),
                                           "--key-id", try #require(db.env["APPSTORE_KEY_ID"]), "--key-env", "CW_TEST_APP2_KEY"],
                                          environment: db.env)
        #expect(set.status == 0 && set.stdout.contains("own key"), "\(set.stdout) \(set.stderr)")

        let unset = try await Harness.night(Self.start, sim: sim, env: db.env, extra: Self.fast)
        #expect(unset.status == 78, "\(unset.stdout) \(unset.stderr.suffix(400))")
        #expect(unset.stderr.contains("churnwatch: app \(Self.second): its key variable CW_TEST_APP2_KEY is not set (`churnwatch apps set` changes where its key is)\n"),
                "\(unset.stderr.suffix(400))")
        #expect(unset.stdout.contains(" done: 40 due, 40 polled, 0 failed"), "the other app finished: \(unset.stdout)")

        var withKey = db.env
        withKey["CW_TEST_APP2_KEY"] = try String(contentsOfFile: keyPath, encoding: .utf8)
        let again = try await Harness.night(Self.start.addingTimeInterval(3600), sim: sim, env: withKey, extra: Self.fast)
        #expect(again.status == 0, "\(again.stderr.suffix(400))")
        let c = try PostgresConnection(connectionString: db.db.connectionURL, logger: .postgres)
        let polled = try c.query("SELECT count(*) FROM churnwatch.subscriptions WHERE bundle_id = \(Self.second) AND last_outcome = 'ok'")
        #expect(try polled[0].decode(Int.self, at: 0) == 40, "the app's key from the variable signed its requests")
    }

    @Test("every command's --help names --app (what it does with several apps)")
    func helpNamesApp() async throws {
        let commands = ["migrate", "apps", "import", "plan", "run", "notifications sync", "notifications ingest", "backfill", "status",
                        "segments", "report", "winback claim", "winback ack", "winback release", "winback list", "offers set",
                        "offers list", "offers remove", "offers sign", "outcomes", "refunds", "prune", "inspect"]
        for command in commands {
            let r = try await CLIRunner.run(command.split(separator: " ").map(String.init) + ["--help"], environment: [:])
            #expect(r.status == 0 && (r.stdout + r.stderr).contains("--app"), "churnwatch \(command) --help: \(r.stdout.prefix(200))")
        }
    }
}
