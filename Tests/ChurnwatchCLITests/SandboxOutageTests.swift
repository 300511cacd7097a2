import Foundation
import Postgres
import Testing

/// Apple's Sandbox down never stops a Production night (issue 46): with the Sandbox refusing
/// connections, or answering 503 all night, a Production deployment's nights plan, poll and log
/// its Production subscriptions exactly as beside a healthy Sandbox, exit 0, and say the Sandbox
/// history failed; its Sandbox subscriptions wait for their own first sync, and when the Sandbox
/// comes back that sync logs nothing old.
@Suite("a Production night without Apple's Sandbox", .serialized)
struct SandboxOutageTests {
    typealias E2E = NightlyRunEndToEndTests
    static let day = E2E.day
    static let nights = 4
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    /// One world's night: the simulator's clock set, then `run` with the feed on.
    static func night(_ world: E2E.World, _ asOf: Date, env: [String: String], extra: [String] = []) async throws -> CLIRunner.Result {
        try world.sim.setClock(E2E.iso(asOf))
        return try await CLIRunner.run(["run", "--as-of", E2E.iso(asOf)] + fast + extra, environment: env)
    }

    static func feedEnv(_ world: E2E.World, _ extra: [String: String] = [:]) -> [String: String] {
        world.env.merging(["CHURNWATCH_NOTIFICATIONS": "on", "CHURNWATCH_NOTIFICATIONS_LOOKBACK": "40d"]) { _, new in new }
            .merging(extra) { _, new in new }
    }

    /// What a night leaves of one environment's subscriptions, as comparable text: the event
    /// log, the items each run polled, the win-back entries and the segments.
    static func outcome(_ db: PostgresConnection, environment: String) throws -> [String: Set<String>] {
        let of: PostgresQuery = "SELECT original_transaction_id FROM churnwatch.subscriptions WHERE coalesce(environment, 'Production') = \(environment)"
        // Every column read as text, joined: one comparable line per row.
        func rows(_ sql: PostgresQuery, columns: Int) throws -> Set<String> {
            Set(try db.query(sql).map { row in try (0..<columns).map { try row.decode(String?.self, at: $0) ?? "-" }.joined(separator: " ") })
        }
        return [
            "events": try rows("""
                SELECT original_transaction_id, event, occurred_at::text FROM churnwatch.churn_events
                WHERE original_transaction_id IN (\(of))
                """, columns: 3),
            "polled": try rows("""
                SELECT r.as_of::text, i.original_transaction_id, i.reason, i.status FROM churnwatch.run_items i
                JOIN churnwatch.runs r ON r.id = i.run_id WHERE i.original_transaction_id IN (\(of))
                """, columns: 4),
            "winback": try rows("SELECT original_transaction_id, campaign, episode FROM churnwatch.winback_queue WHERE original_transaction_id IN (\(of))", columns: 3),
            "segments": try rows("SELECT original_transaction_id, segment FROM churnwatch.subscription_segments WHERE original_transaction_id IN (\(of))", columns: 2),
        ]
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int {
        try db.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("the Sandbox refusing connections, then answering 503 all night: Production's nights exit 0 and plan, poll and log exactly as beside a healthy Sandbox; Sandbox subscriptions wait; status, metrics and the run's lines say so; the Sandbox back, its first sync logs nothing old")
    func productionNightsGoOn() async throws {
        let seed = 47, subscribers = 800
        let healthy = try await E2E.World.make(subscribers: subscribers, seed: seed, populationLead: 45 * Self.day)
        defer { healthy.close() }
        let refused = try await E2E.World.make(subscribers: subscribers, seed: seed, populationLead: 45 * Self.day)
        defer { refused.close() }
        let failing = try await E2E.World.make(subscribers: subscribers, seed: seed, populationLead: 45 * Self.day)
        defer { failing.close() }
        // Nothing listens on port 1 of loopback: every Sandbox call is refused.
        let refusedEnv = Self.feedEnv(refused, ["APPSTORE_SANDBOX_BASE_URL": "http://127.0.0.1:1"])
        // The simulator's Sandbox answers 503 to every call; a short retry wait keeps the night short.
        _ = try failing.sim.request("POST", "/_sim/outage?environment=Sandbox&status=503")
        let failingEnv = Self.feedEnv(failing, ["APPSTORE_MAX_RETRY_WAIT": "2"])
        let metrics = FileManager.default.temporaryDirectory.appendingPathComponent("sandbox-outage-\(UUID()).prom").path
        defer { try? FileManager.default.removeItem(atPath: metrics) }

        for n in 0..<Self.nights {
            let asOf = E2E.start.addingTimeInterval(Double(n) * Self.day)
            let a = try await Self.night(healthy, asOf, env: Self.feedEnv(healthy))
            #expect(a.status == 0, "healthy night \(n): \(a.stderr.suffix(400))")
            for (name, world, env) in [("refused", refused, refusedEnv), ("503", failing, failingEnv)] {
                let b = try await Self.night(world, asOf, env: env, extra: ["--metrics-file", metrics, "--log-format", "json"])
                #expect(b.status == 0, "\(name) night \(n): \(b.stdout) \(b.stderr.suffix(600))")
                #expect(b.stdout.contains("done:"), "\(name) night \(n): \(b.stdout)")
                #expect(b.stdout.contains("Sandbox history: unavailable"), "\(name) night \(n): the run's lines name the failure: \(b.stdout)")
                #expect(b.stderr.contains("the Sandbox history is unavailable"), "\(name) night \(n): \(b.stderr.suffix(600))")
                #expect(b.stderr.contains("its subscriptions are not planned until it is"), "\(name) night \(n): \(b.stderr.suffix(600))")
            }
        }
        let healthyDb = try healthy.connect()
        let expected = try Self.outcome(healthyDb, environment: "Production")
        #expect(try Self.count(healthyDb, "SELECT count(*) FROM churnwatch.churn_events") > 20, "the nights have events to compare")
        #expect(try Self.count(healthyDb, """
            SELECT count(*) FROM churnwatch.run_items i JOIN churnwatch.subscriptions s USING (original_transaction_id)
            WHERE s.environment = 'Sandbox'
            """) > 0, "beside a healthy Sandbox, Sandbox subscriptions are polled")
        for (name, world) in [("refused", refused), ("503", failing)] {
            let db = try world.connect()
            let got = try Self.outcome(db, environment: "Production")
            for (what, rows) in expected {
                let (missing, extra) = (rows.subtracting(got[what] ?? []), (got[what] ?? []).subtracting(rows))
                #expect(missing.isEmpty && extra.isEmpty, "\(name): Production's \(what) differ: missing \(missing.sorted().prefix(5)), extra \(extra.sorted().prefix(5))")
            }
            #expect(try Self.count(db, """
                SELECT count(*) FROM churnwatch.run_items i JOIN churnwatch.subscriptions s USING (original_transaction_id)
                WHERE s.environment = 'Sandbox'
                """) == 0, "\(name): Sandbox subscriptions wait for their first sync")
        }

        // What an operator sees while the Sandbox is down.
        let status = try await CLIRunner.run(["status", "--json"], environment: refusedEnv)
        let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        let sandbox = json?["sandbox_feed"] as? [String: Any]
        #expect(sandbox?["first_sync_pending"] as? Bool == true, "status --json: \(status.stdout)")
        let text = try await CLIRunner.run(["status"], environment: refusedEnv)
        #expect(text.stdout.contains("Sandbox history: the first sync is not read through"), "\(text.stdout)")
        let prom = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(prom.contains("churnwatch_feed_history_read_through{bundle_id=\"com.example.churnwatch\",environment=\"Sandbox\"} 0"), "\(prom)")
        #expect(prom.contains("churnwatch_feed_history_read_through{bundle_id=\"com.example.churnwatch\",environment=\"Production\"} 1"), "\(prom)")
        #expect(prom.contains("churnwatch_feed_first_sync_pending{bundle_id=\"com.example.churnwatch\",environment=\"Sandbox\"} 1"), "\(prom)")

        // The Sandbox back: its first sync establishes its subscriptions and logs nothing old.
        _ = try failing.sim.request("POST", "/_sim/outage?environment=Sandbox&status=0")
        let back = E2E.start.addingTimeInterval(Double(Self.nights) * Self.day)
        for (name, world, env) in [("refused", refused, Self.feedEnv(refused)), ("503", failing, Self.feedEnv(failing))] {
            let r = try await Self.night(world, back, env: env)
            #expect(r.status == 0, "\(name), the Sandbox back: \(r.stderr.suffix(400))")
            #expect(!r.stdout.contains("Sandbox history: unavailable"), "\(name): \(r.stdout)")
            let db = try world.connect()
            let sandboxEvents = try Self.outcome(db, environment: "Sandbox")["events"] ?? []
            #expect(sandboxEvents.isEmpty, "\(name): the Sandbox's first sync logged history as news: \(sandboxEvents.sorted().prefix(5))")
            #expect(try Self.count(db, """
                SELECT count(*) FROM churnwatch.notifications n WHERE n.environment = 'Sandbox'
                """) > 0, "\(name): the Sandbox history was read once back")
            let after = try await CLIRunner.run(["status", "--json"], environment: env)
            let sandboxAfter = (try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])?["sandbox_feed"] as? [String: Any]
            #expect(sandboxAfter?["first_sync_pending"] as? Bool == false, "\(name): \(after.stdout)")
        }
    }
}
