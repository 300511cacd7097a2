import AppStoreModels
import AppStoreServerAPI
import Foundation
import Logging
import Postgres
import Testing

/// `churnwatch serve` as Apple and a hostile client meet it: real notifications signed by the
/// simulator's chain posted over loopback, and requests that must not get in.
@Suite("churnwatch serve: Apple's notifications received", .serialized)
struct ServeCLITests {
    typealias E2E = NightlyRunEndToEndTests
    typealias Feed = NotificationFeedCLITests
    static let day = E2E.day
    static let asOf = Feed.asOf

    /// A started `serve` and the port it listens on.
    struct Server {
        let process: RunningCLI
        let port: Int

        static func start(_ env: [String: String], port: Int = 0, extra: [String] = []) async throws -> Server {
            let process = try RunningCLI(["serve", "--listen", "127.0.0.1:\(port)", "--log-format", "json"] + extra, environment: env)
            guard try await process.waitForStdout(containing: "listening on", timeout: 60) else {
                process.signal(SIGKILL)
                throw CLITestError("serve did not say it listens: \(process.stdout) \(process.stderr.suffix(600))")
            }
            let line = process.stdout.split(separator: "\n").first { $0.contains("listening on") } ?? ""
            let address = line.split(separator: " ").first { $0.hasPrefix("http://") } ?? ""
            guard let port = address.split(separator: ":").last.flatMap({ Int($0) }) else { throw CLITestError("no port in \(line)") }
            return Server(process: process, port: port)
        }

        func post(_ payload: String) throws -> (status: Int?, body: String) {
            try RawHTTP.exchange(port: port, method: "POST", path: "/apple/notifications", body: "{\"signedPayload\":\"\(payload)\"}")
        }

        func stop() async throws -> CLIRunner.Result {
            process.signal(SIGTERM)
            return try await process.wait()
        }

        /// For `defer`: a test that failed before `stop()` leaves no serve behind.
        func kill() {
            if process.process.isRunning { process.signal(SIGKILL) }
        }
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int { try Feed.count(db, sql) }

    /// Waits (bounded) until every inbox row is applied: the applier works in the background.
    static func applied(_ db: PostgresConnection, within seconds: TimeInterval) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try count(db, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NULL") == 0 { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test("three days of Apple's notifications posted to two serve processes on one database (each delivered to both) end as `notifications ingest` leaves them (events and segments equal); a repeat is 200 and changes nothing; a forged signature, another chain, an unknown app and a bad body are refused and stored nowhere; /healthz, /metrics; SIGTERM exits 0")
    func receivesAndRefuses() async throws {
        let world = try await E2E.World.make(subscribers: 400, seed: 41, populationLead: 45 * Self.day)
        defer { world.close() }
        let reference = try ScratchDatabase.create()
        defer { reference.drop() }
        var referenceEnv = world.env
        referenceEnv["DATABASE_URL"] = reference.connectionURL
        let night: [String] = ["run", "--as-of", E2E.iso(Self.asOf.addingTimeInterval(-3 * Self.day)), "--notifications", "off",
                               "--status-rate", "5000", "--history-rate", "5000"]
        try world.sim.setClock(E2E.iso(Self.asOf.addingTimeInterval(-3 * Self.day)))
        for env in [world.env, referenceEnv] {
            if env["DATABASE_URL"] == reference.connectionURL {
                #expect(try await CLIRunner.run(["migrate"], environment: env).status == 0)
                #expect(try await CLIRunner.run(["import", world.sim.subscriptionsCSV.path], environment: env).status == 0)
            }
            let r = try await CLIRunner.run(night, environment: env)
            #expect(r.status == 0, "\(r.stderr.suffix(400))")
        }
        try world.sim.setClock(E2E.iso(Self.asOf))
        let recent = try await Feed.payloads(world, from: Self.asOf.addingTimeInterval(-3 * Self.day), to: Self.asOf)
        #expect(recent.count > 20, "only \(recent.count) notifications in three days")

        // The reference: the same notifications through `notifications ingest`.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cw-serve-\(UUID().uuidString.prefix(8)).jsonl")
        defer { try? FileManager.default.removeItem(at: file) }
        try recent.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        let ingested = try await CLIRunner.run(["notifications", "ingest", file.path], environment: referenceEnv)
        #expect(ingested.status == 0, "\(ingested.stderr.suffix(400))")

        // Two serve processes on one database, as behind a load balancer: each notification
        // posted to one, then delivered again to the other.
        let server = try await Server.start(world.env)
        let second = try await Server.start(world.env)
        let db = try world.connect()
        for (i, p) in recent.enumerated() {
            let (first, other) = i % 2 == 0 ? (server, second) : (second, server)
            let answer = try first.post(p)
            #expect(answer.status == 200 && answer.body == "stored\n", "notification \(i): \(answer)")
            let repeated = try other.post(p)
            #expect(repeated.status == 200 && repeated.body == "already known\n", "notification \(i) again: \(repeated)")
        }
        #expect(try await Self.applied(db, within: 30), "the applier left inbox rows unapplied")
        let events = try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events")
        #expect(events > 0, "nothing was logged")
        let mine = try Harness.endState(db).prefix(2)
        let theirs = try Harness.endState(try PostgresConnection(connectionString: reference.connectionURL, logger: .postgres)).prefix(2)
        for (m, t) in zip(mine, theirs) { #expect(m.1 == t.1, "\(m.0): serve \(m.1.count) rows, ingest \(t.1.count)") }
        print("serve: \(recent.count) notifications posted and applied, \(events) events, \(mine.map { "\($0.0): \($0.1.count)" })")

        // A repeat (Apple retries until it gets a 200): 200, nothing new.
        let inbox = try Self.count(db, "SELECT count(*) FROM churnwatch.notification_inbox")
        let again = try server.post(recent[0])
        #expect(again.status == 200 && again.body.contains("already known"), "\(again)")

        // Refused, and stored nowhere.
        try await Self.expectRefusals(server, recent: recent, world: world)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.notification_inbox") == inbox)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.quarantine") == 0)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events") == events)

        let health = try RawHTTP.exchange(port: server.port, method: "GET", path: "/healthz")
        #expect(health.status == 200 && health.body == "ok\n", "\(health)")
        let metrics = try RawHTTP.exchange(port: server.port, method: "GET", path: "/metrics")
        #expect(metrics.status == 200)
        let mineStored = (recent.count + 1) / 2
        #expect(metrics.body.contains("churnwatch_serve_notifications_received_total{result=\"stored\"} \(mineStored)"), "\(metrics.body.prefix(3000))")
        #expect(metrics.body.contains("churnwatch_serve_notifications_received_total{result=\"known\"} \(recent.count - mineStored + 1)"))
        #expect(metrics.body.contains("churnwatch_serve_notifications_rejected_total{reason=\"verification\"} 2"), "\(metrics.body.prefix(3000))")
        #expect(metrics.body.contains("churnwatch_serve_requests_total{route=\"/apple/notifications\",status=\"200\"} \(recent.count + 1)"))
        let secondEnded = try await second.stop()
        #expect(secondEnded.status == 0, "\(secondEnded.stderr.suffix(600))")
        #expect(try RawHTTP.exchange(port: server.port, method: "GET", path: "/apple/notifications").status == 405)
        #expect(try RawHTTP.exchange(port: server.port, method: "GET", path: "/nothing").status == 404)

        let ended = try await server.stop()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
        #expect(ended.stderr.contains("churnwatch serve: stopped"), "\(ended.stderr.suffix(600))")
    }

    @Test("an app added with `apps add` while serve runs is served without a restart: its notification is stored and applied under its own bundle id")
    func appAddedWhileServing() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 80, seed: 61, start: E2E.iso(E2E.start.addingTimeInterval(-45 * Self.day)),
                                                   extra: ["--apps", "2"])
        defer { sim.stop() }
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        var env = sim.environment
        env["DATABASE_URL"] = db.connectionURL
        #expect(try await CLIRunner.run(["migrate"], environment: env).status == 0)
        let server = try await Server.start(env)
        let second = MultiAppRunTests.second
        let row = try #require(try String(contentsOf: sim.directory.appendingPathComponent("pki/apps.tsv"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }.first { $0.first == second })
        let add = try await CLIRunner.run(["apps", "add", second, "--app-apple-id", row[1]], environment: env)
        #expect(add.status == 0, "\(add.stderr)")
        var secondEnv = env
        (secondEnv["APPSTORE_BUNDLE_ID"], secondEnv["APPSTORE_APP_APPLE_ID"]) = (second, row[1])
        try sim.setClock(E2E.iso(Self.asOf))
        let payloads = try await Feed.payloads(E2E.World(sim: sim, db: db, env: secondEnv), from: Self.asOf.addingTimeInterval(-5 * Self.day), to: Self.asOf)
        let answer = try server.post(try #require(payloads.first))
        #expect(answer.status == 200 && answer.body == "stored\n", "\(answer)")
        let c = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        #expect(try await Self.applied(c, within: 30))
        #expect(try Self.count(c, "SELECT count(*) FROM churnwatch.notifications WHERE bundle_id = \(second)") == 1)
        let ended = try await server.stop()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
    }

    /// A forged signature, another chain (a second simulator's), an unknown app, a bad body.
    static func expectRefusals(_ server: Server, recent: [String], world: E2E.World) async throws {
        var parts = recent[1].split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        let forged = try server.post(parts.joined(separator: "."))
        #expect(forged.status == 403, "a forged signature: \(forged)")

        let stranger = try await SimulatorProcess.start(subscribers: 60, seed: 7, start: E2E.iso(E2E.start.addingTimeInterval(-45 * Self.day)))
        defer { stranger.stop() }
        try stranger.setClock(E2E.iso(Self.asOf))
        let foreignWorld = E2E.World(sim: stranger, db: world.db, env: stranger.environment)
        let foreign = try await Feed.payloads(foreignWorld, from: Self.asOf.addingTimeInterval(-10 * Self.day), to: Self.asOf)
        let other = try server.post(try #require(foreign.first))
        #expect(other.status == 403, "another chain: \(other)")

        var claim = try #require(JSONSerialization.jsonObject(with: Self.base64URL(parts[1])) as? [String: Any])
        var data = claim["data"] as? [String: Any] ?? [:]
        data["bundleId"] = "com.example.someone-else"
        claim["data"] = data
        parts[1] = Self.base64URLString(try JSONSerialization.data(withJSONObject: claim))
        let unknown = try server.post(parts.joined(separator: "."))
        #expect(unknown.status == 403 && unknown.body.contains("no app of this database"), "another app: \(unknown)")

        let body = try RawHTTP.exchange(port: server.port, method: "POST", path: "/apple/notifications", body: "{\"payload\": 1}")
        #expect(body.status == 400, "a bad body: \(body)")
    }

    static func base64URL(_ s: String) -> Data {
        var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while t.count % 4 != 0 { t += "=" }
        return Data(base64Encoded: t) ?? Data()
    }

    static func base64URLString(_ d: Data) -> String {
        d.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
