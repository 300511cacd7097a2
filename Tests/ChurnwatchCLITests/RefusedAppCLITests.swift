import Foundation
import Postgres
import Testing

/// Issue 40, items 1, 2 and 5: an app whose key Apple refuses on its first night. Its first sync
/// reads nothing, so nothing is planned for it (a run planned by the windows would leave its
/// subscriptions tried, and the history read once the key is mended would be logged as news);
/// the night exits 75 naming it, even with nothing due; and the night re-run adds no empty run
/// for the app that had finished it.
@Suite("an app refused on its first night (the binary)", .serialized)
struct RefusedAppCLITests {
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let second = MultiAppRunTests.second
    static let feed = MultiAppRunTests.fast + ["--notifications", "on"]

    static func refuseSecond(_ env: [String: String]) async throws {
        let key = try #require(env["APPSTORE_PRIVATE_KEY_PATH"]), issuer = try #require(env["APPSTORE_ISSUER_ID"])
        let wrong = try await CLIRunner.run(["apps", "set", second, "--issuer-id", issuer, "--key-id", "NOTTHEKEY1", "--key-file", key],
                                            environment: env)
        #expect(wrong.status == 0, "\(wrong.stderr)")
    }

    static func count(_ c: PostgresConnection, _ sql: PostgresQuery) throws -> Int { try c.query(sql)[0].decode(Int.self, at: 0) }

    @Test("refused on its first night: no run planned, exit 75 naming it; mended, the same night re-run adds no run for the app that finished it, and the first sync logs no history as news")
    func refusedFirstNight() async throws {
        // 45 days of history before the first night: what a first sync establishes, never logs.
        let sim = try await SimulatorProcess.start(subscribers: 150, seed: 74, start: Self.iso(Self.start.addingTimeInterval(-45 * Self.day)),
                                                   extra: ["--apps", "2"])
        defer { sim.stop() }
        let db = try await MultiAppRunTests.twoApps(sim)
        defer { db.db.drop() }
        let first = try #require(db.env["APPSTORE_BUNDLE_ID"])
        try await Self.refuseSecond(db.env)
        let c = try PostgresConnection(connectionString: db.db.connectionURL, logger: .postgres)

        let refused = try await Harness.night(Self.start, sim: sim, env: db.env, extra: Self.feed)
        #expect(refused.status == 75, "\(refused.stdout) \(refused.stderr.suffix(400))")
        #expect(refused.stderr.contains("churnwatch: app \(Self.second): Apple rejected the API key"), "\(refused.stderr.suffix(600))")
        #expect(try Self.count(c, "SELECT count(*) FROM churnwatch.runs WHERE bundle_id = \(Self.second)") == 0,
                "nothing is planned before the app's first sync has read its history")
        #expect(try Self.count(c, "SELECT count(*) FROM churnwatch.subscriptions WHERE bundle_id = \(Self.second) AND last_polled_at IS NOT NULL") == 0)
        #expect(try Self.count(c, "SELECT count(*) FROM churnwatch.runs WHERE bundle_id = \(first) AND status = 'done'") == 1)

        let mended = try await CLIRunner.run(["apps", "set", Self.second, "--deployment-key"], environment: db.env)
        #expect(mended.status == 0, "\(mended.stderr)")
        let again = try await Harness.night(Self.start, sim: sim, env: db.env, extra: Self.feed)
        #expect(again.status == 0, "\(again.stdout) \(again.stderr.suffix(400))")
        #expect(again.stdout.contains("finished tonight's night already"), "the first app's night is done: \(again.stdout)")
        let runs = try c.query("SELECT bundle_id, count(*) FILTER (WHERE status = 'done'), count(*) FROM churnwatch.runs GROUP BY 1 ORDER BY 1")
            .map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(Int.self, at: 1))/\(try $0.decode(Int.self, at: 2))" }
        #expect(runs == ["\(first) 1/1", "\(Self.second) 1/1"], "no empty run for the app that had finished the night")

        let next = try await Harness.night(Self.start.addingTimeInterval(Self.day), sim: sim, env: db.env, extra: Self.feed)
        #expect(next.status == 0, "\(next.stderr.suffix(400))")
        for app in [first, Self.second] {
            let history = try Self.count(c, "SELECT count(*) FROM churnwatch.churn_events WHERE bundle_id = \(app) AND occurred_at < \(Self.start)")
            #expect(history == 0, "\(app): \(history) events dated before its first night")
            let unsaid = try Self.count(c, """
                SELECT count(*) FROM churnwatch.notifications
                WHERE bundle_id = \(app) AND outcome = 'applied' AND signed_date < \(Self.start) AND reason IS NULL
                """)
            #expect(unsaid == 0, "\(app): \(unsaid) notifications of the first sync without its reason")
        }
        let established = try Self.count(c, "SELECT count(*) FROM churnwatch.notifications WHERE bundle_id = \(Self.second) AND signed_date < \(Self.start)")
        #expect(established > 20, "the refused app's history was read once its key was mended: \(established)")
    }

    @Test("an app fed by its feed with nothing due, its key refused: exit 75 and its line on stderr (not 0)")
    func refusedWithNothingDue() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 40, seed: 75, start: Self.iso(Self.start.addingTimeInterval(-10 * Self.day)),
                                                   extra: ["--apps", "2"])
        defer { sim.stop() }
        let db = try await OwnThread.run { try Harness.database(sim: sim) }
        defer { db.db.drop() }
        let apps = try String(contentsOf: sim.directory.appendingPathComponent("pki/apps.tsv"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        let row = try #require(apps.first { $0.first == Self.second })
        // Added, never imported: the feed is how it learns of its subscribers.
        let add = try await CLIRunner.run(["apps", "add", Self.second, "--app-apple-id", row[1]], environment: db.env)
        #expect(add.status == 0, "\(add.stderr)")
        try await Self.refuseSecond(db.env)
        let r = try await Harness.night(Self.start, sim: sim, env: db.env, extra: Self.feed)
        #expect(r.status == 75, "\(r.stdout) \(r.stderr.suffix(400))")
        #expect(r.stderr.contains("churnwatch: app \(Self.second): Apple rejected the API key"), "\(r.stderr.suffix(600))")
        #expect(r.stderr.hasSuffix("1 of 2 apps did not finish: \(Self.second) (exit 78); the next run resumes them\n"), "\(r.stderr.suffix(300))")
    }
}
