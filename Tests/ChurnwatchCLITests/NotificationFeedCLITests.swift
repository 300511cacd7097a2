import AppStoreModels
import AppStoreServerAPI
import Foundation
import Logging
import Postgres
import Testing

/// `churnwatch notifications sync` and `ingest`, and the inbox, against the simulator and a real
/// PostgreSQL, as operators run them.
@Suite("notifications sync, ingest and inbox", .serialized)
struct NotificationFeedCLITests {
    typealias E2E = NightlyRunEndToEndTests
    static let day = E2E.day
    static let asOf = E2E.start.addingTimeInterval(3 * day)

    /// The history's signed payloads between `from` and `to` in `environment`, read with
    /// churnwatch's own client.
    static func payloads(_ world: E2E.World, from: Date, to: Date, environment: AppStoreEnvironment = .production) async throws -> [String] {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let client = AppStoreServerAPIClient(configuration: try AppStoreConfiguration.fromEnvironment(world.env), logger: logger)
        let request = NotificationHistoryRequest(startDate: EpochMilliseconds(from), endDate: EpochMilliseconds(to))
        var out: [String] = [], token: String?
        repeat {
            let page = try #require(await client.notificationHistoryPage(request, paginationToken: token, environment: environment).value)
            out += page.records.compactMap(\.signedPayload)
            token = page.paginationToken
        } while token != nil
        return out
    }

    /// What a Production deployment's first sync at `asOf` reads: Production's history over
    /// `lookbackDays`, and Sandbox's over its retention (30 days, less the hour's margin).
    static func bothHistories(_ world: E2E.World, asOf: Date, lookbackDays: Double) async throws -> [String] {
        try await payloads(world, from: asOf.addingTimeInterval(-lookbackDays * day), to: asOf)
            + payloads(world, from: asOf.addingTimeInterval(-30 * day + 3600), to: asOf, environment: .sandbox)
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int {
        try db.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("ingest applies a file of notifications once (a UTF-8 byte order mark before the first line, a Sandbox subscriber's notification in a Production deployment): a second pass and the inbox count duplicates; a truncated line and another app's are quarantined and change nothing; a line over 1 MiB is skipped and named")
    func ingestTwiceAndTheInbox() async throws {
        let world = try await E2E.World.make(subscribers: 600, seed: 21, simFlags: ["--sandbox-share", "0.2"], populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        let env = world.env
        // Establish state by polling once (windows only) three days ago, then apply the last
        // three days' notifications.
        let first = try await world.night(Self.asOf.addingTimeInterval(-3 * Self.day),
                                          extra: ["--notifications", "off", "--status-rate", "5000", "--history-rate", "5000"])
        #expect(first.status == 0, "\(first.stderr.suffix(400))")
        try world.sim.setClock(E2E.iso(Self.asOf))
        let recent = try await Self.payloads(world, from: Self.asOf.addingTimeInterval(-3 * Self.day), to: Self.asOf)
        #expect(recent.count > 20, "only \(recent.count) notifications in three days")
        let sandbox = try await Self.payloads(world, from: Self.asOf.addingTimeInterval(-20 * Self.day), to: Self.asOf, environment: .sandbox)
        let truncated = String(recent[0].dropLast(40))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ingest-\(UUID().uuidString.prefix(8)).jsonl")
        defer { try? FileManager.default.removeItem(at: file) }
        var lines = recent.enumerated().map { i, p in i % 2 == 0 ? "{\"signedPayload\": \"\(p)\"}" : p }
        lines += ["", truncated, try #require(sandbox.first), String(repeating: "A", count: 2 << 20)]
        try ("\u{FEFF}" + lines.joined(separator: "\n")).write(to: file, atomically: true, encoding: .utf8)

        let once = try await CLIRunner.run(["notifications", "ingest", file.path], environment: env)
        #expect(once.status == 0, "\(once.stderr)")
        #expect(once.stdout.contains("\(recent.count + 2) read"), "\(once.stdout)")
        #expect(once.stdout.contains("1 quarantined"), "\(once.stdout)")
        // A line longer than 1 MiB is skipped and named, not read into memory.
        #expect(once.stderr.contains("skipped 1 line(s) longer than 1048576 bytes (line \(lines.count))"), "\(once.stderr)")
        let applied = try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE outcome IN ('applied', 'stale')")
        #expect(applied == recent.count + 1, "every line but the truncated one, the Sandbox one included")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE environment = 'Sandbox'") == 1)
        let events = try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events")
        #expect(events > 0, "three days of notifications wrote no events")
        let reasons = try db.query("SELECT reason FROM churnwatch.quarantine WHERE endpoint = 'notification' ORDER BY id").map { try $0.decode(String.self, at: 0) }
        #expect(reasons.count == 1, "\(reasons)")

        let twice = try await CLIRunner.run(["notifications", "ingest", file.path], environment: env)
        // The bad line is rejected again but kept once.
        #expect(twice.status == 0 && twice.stdout.contains("\(recent.count + 1) duplicate") && twice.stdout.contains("1 quarantined"),
                "\(twice.stdout) \(twice.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.quarantine WHERE endpoint = 'notification'") == 1)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events") == events)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE outcome <> 'quarantined'") == recent.count + 1)

        // The inbox: the same payloads inserted by an app's backend are duplicates, once each.
        for p in recent.prefix(5) { _ = try db.query("INSERT INTO churnwatch.notification_inbox (signed_payload) VALUES (\(p))") }
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("cw-empty-\(UUID().uuidString.prefix(8))")
        try Data().write(to: empty)
        defer { try? FileManager.default.removeItem(at: empty) }
        let inbox = try await CLIRunner.run(["notifications", "ingest", empty.path], environment: env)
        #expect(inbox.status == 0 && inbox.stdout.contains("notification inbox: 5 read, 0 applied, 5 duplicate"), "\(inbox.stdout) \(inbox.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NULL") == 0)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notification_inbox WHERE outcome = 'duplicate'") == 5)

        // Another app's notifications (another app Apple id; Production ones, as Sandbox carries
        // none): nothing verifies, exit 65, nothing changes.
        var other = env
        other["APPSTORE_APP_APPLE_ID"] = "999999"
        let production = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ingest-\(UUID().uuidString.prefix(8)).jsonl")
        defer { try? FileManager.default.removeItem(at: production) }
        try recent.joined(separator: "\n").write(to: production, atomically: true, encoding: .utf8)
        let foreign = try await CLIRunner.run(["notifications", "ingest", production.path], environment: other)
        #expect(foreign.status == 65, "\(foreign.stdout) \(foreign.stderr)")
        #expect(foreign.stderr.contains("nothing in"), "\(foreign.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events") == events)
    }

    @Test("a sync Apple keeps cutting short resumes from its stored page each time: in the end every notification is recorded once and the events are those of one clean sync")
    func syncCutShortResumes() async throws {
        let flaky = try await E2E.World.make(subscribers: 400, seed: 31, simFlags: ["--error-rate", "0.3"], populationLead: 45 * Self.day)
        defer { flaky.close() }
        let db = try flaky.connect()
        try flaky.sim.setClock(E2E.iso(Self.asOf))
        var env = flaky.env.merging(["APPSTORE_MAX_ATTEMPTS": "2", "APPSTORE_MAX_RETRY_WAIT": "1"]) { _, new in new }
        env["CHURNWATCH_NOTIFICATIONS_LOOKBACK"] = "60d"
        var cutShort = 0, resumedMidWindow = 0, attempts = 0
        while attempts < 60 {
            attempts += 1
            if try Self.count(db, "SELECT count(*) FROM churnwatch.notification_feed WHERE pagination_token IS NOT NULL") > 0 { resumedMidWindow += 1 }
            let r = try await CLIRunner.run(["notifications", "sync", "--as-of", E2E.iso(Self.asOf)], environment: env)
            if r.status == 0 { break }
            #expect(r.status == 75, "\(r.stderr)")
            cutShort += 1
        }
        #expect(attempts < 60, "the sync never finished")
        #expect(cutShort > 0, "the simulator's errors never cut a sync short: the test shows nothing")
        #expect(resumedMidWindow > 0, "no sync resumed from a stored page token")
        let recorded = try Self.count(db, "SELECT count(*) FROM churnwatch.notifications")
        let expected = try await Self.bothHistories(flaky, asOf: Self.asOf, lookbackDays: 60)
        #expect(recorded == expected.count, "recorded \(recorded), the histories hold \(expected.count)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE outcome = 'quarantined'") == 0)
        print("sync cut short \(cutShort) times in \(attempts) attempts, resumed mid-window \(resumedMidWindow) times; \(recorded) notifications")
        // `status` shows the feed before any run: read up to the sync's moment, nothing in progress.
        let status = try await CLIRunner.run(["status", "--json", "--as-of", E2E.iso(Self.asOf.addingTimeInterval(60))], environment: env)
        #expect(status.status == 0, "\(status.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        let feed = try #require(object?["feed"] as? [String: Any], "\(status.stdout)")
        #expect(object?["run"] is NSNull, "\(status.stdout)")
        // `status` shows the configured environment's feed (Production).
        let production = try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE environment = 'Production'")
        #expect(production > 0 && ((feed["records_total"] as? Int) ?? 0) >= production, "\(status.stdout)")
        #expect((feed["cursor_age_seconds"] as? Double) == 60, "\(status.stdout)")
        #expect((feed["sync_in_progress"] as? Bool) == false && (feed["planning_by_feed_possible"] as? Bool) == true, "\(status.stdout)")
    }

    @Test("notifications with a rogue chain, a truncated JWS or another app's bundle id are quarantined by the sync and establish nothing")
    func faultyPayloadsAreQuarantined() async throws {
        let world = try await E2E.World.make(subscribers: 300, seed: 9, simFlags: ["--fault-rate", "0.1", "--fault-kinds", "rogue_chain,truncated_jws,foreign_bundle"],
                                             populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        try world.sim.setClock(E2E.iso(Self.asOf))
        let r = try await CLIRunner.run(["notifications", "sync", "--as-of", E2E.iso(Self.asOf)],
                                        environment: world.env.merging(["CHURNWATCH_NOTIFICATIONS": "on"]) { _, new in new })
        #expect(r.status == 0, "\(r.stderr)")
        let truth = try world.sim.truth(at: E2E.iso(Self.asOf))
        let faulty = Set(truth.values.filter { $0.fault != nil }.map(\.original_transaction_id))
        #expect(!faulty.isEmpty)
        let established = Set(try db.query("SELECT original_transaction_id FROM churnwatch.subscriptions WHERE snapshot IS NOT NULL")
            .map { try $0.decode(String.self, at: 0) })
        #expect(established.isDisjoint(with: faulty), "faulty payloads established \(established.intersection(faulty).prefix(5))")
        #expect(established.count > 150, "only \(established.count) established")
        let quarantined = try Self.count(db, "SELECT count(*) FROM churnwatch.notifications WHERE outcome = 'quarantined' AND notification_uuid IS NULL")
        let kept = try Self.count(db, "SELECT count(*) FROM churnwatch.quarantine WHERE endpoint = 'notification'")
        #expect(quarantined > 0 && quarantined == kept, "\(quarantined) notifications quarantined, \(kept) payloads kept")
        let reasons = try db.query("SELECT DISTINCT reason FROM churnwatch.quarantine").map { try $0.decode(String.self, at: 0) }
        #expect(reasons.count >= 3, "one reason per fault kind at least: \(reasons)")
    }

    @Test("a sync whose key Apple refuses exits 78 (as a run does) with one line and leaves the cursor unset")
    func refusedKeyExits78() async throws {
        let world = try await E2E.World.make(subscribers: 50, seed: 4, populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        try world.sim.setClock(E2E.iso(Self.asOf))
        var env = world.env
        env["APPSTORE_KEY_ID"] = "WRONGKEY99"
        let r = try await CLIRunner.run(["notifications", "sync", "--as-of", E2E.iso(Self.asOf)], environment: env)
        #expect(r.status == 78, "\(r.stdout) \(r.stderr)")
        let lines = r.stderr.split(separator: "\n").filter { $0.contains("the notification history stopped early") }
        #expect(lines.count == 1 && lines[0].contains("unauthorized"), "\(r.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notification_feed WHERE synced_until IS NOT NULL") == 0)
    }

    @Test("ingest of a directory or a missing file: one line saying which, exit 65, before touching the database")
    func ingestBadPath() async throws {
        let env = ["DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"]
        for path in [FileManager.default.temporaryDirectory.path, "/nonexistent/notifications.jsonl"] {
            let r = try await CLIRunner.run(["notifications", "ingest", path], environment: env)
            #expect(r.status == 65, "\(path): \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("cannot read \(path)"), "\(r.stderr)")
        }
    }
}
