import Foundation
import Postgres
import Testing

/// Nights against the simulator with the team's tools listening: serve's sender delivers what
/// the nights write; a campaign's consumer gets its ready entries with signed offers.
@Suite("webhooks end to end: nights, serve's sender, a campaign's consumer", .serialized)
struct WebhooksEndToEndTests {
    typealias E2E = NightlyRunEndToEndTests

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int { try db.query(sql)[0].decode(Int.self, at: 0) }

    /// Waits (at most `seconds`, checking every 50 ms) until `done` holds.
    static func until(_ seconds: TimeInterval, _ done: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try done() { return true }
            usleep(50_000)
        }
        return try done()
    }

    @Test("three nights while serve runs: every event and segment move of the app delivered once, valid, in order per subscription, with its own fields; serve stops at once; then save_offer's consumer gets every ready entry with its offer signed, never a held-out one, and `winback claim` refuses the campaign")
    func nightsToTheTeamsTools() async throws {
        let world = try await E2E.World.make(subscribers: 800, seed: 15)
        defer { world.close() }
        let env = world.env
        let db = try world.connect()
        #expect(try await CLIRunner.run(["offers", "set", "--campaign", "save_offer", "--offer-id", "save50", "--holdout", "0.3"], environment: env).status == 0)
        #expect(try await world.night(E2E.start).status == 0)
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.webhook_messages") == 0, "no endpoint yet, no message")
        let eventsBefore = try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events")
        let movesBefore = try Self.count(db, "SELECT count(*) FROM churnwatch.segment_changes")

        let add = try await CLIRunner.run(["webhooks", "add", "all", "--url", "http://127.0.0.1:9/hook", "--allow-http", "--allow-private"], environment: env)
        let secret = add.stdout.split(separator: "\n").first { $0.hasPrefix("secret: ") }.map { String($0.dropFirst(8)) } ?? ""
        let receiver = try WebhookReceiverProcess.start(secrets: [secret])
        defer { receiver.stop() }
        #expect(try await CLIRunner.run(["webhooks", "set", "all", "--url", receiver.url], environment: env).status == 0)
        let server = try await ServeCLITests.Server.start(env)
        defer { server.kill() }
        for n in 1...3 {
            let r = try await world.night(E2E.start.addingTimeInterval(Double(n) * E2E.day))
            try #require(r.status == 0, "night \(n): \(r.stderr.suffix(300))")
        }
        let events = try Self.count(db, "SELECT count(*) FROM churnwatch.churn_events") - eventsBefore
        let moves = try Self.count(db, "SELECT count(*) FROM churnwatch.segment_changes") - movesBefore
        try #require(events > 50, "too few events to test with: \(events)")
        let delivered = try Self.until(60) { try receiver.stats().unique_ids >= events + moves }
        let stats = try receiver.stats()
        #expect(delivered, "\(stats.unique_ids) of \(events + moves) delivered")
        #expect(stats.by_type["churn_event.created"] == events && stats.by_type["segment.changed"] == moves, "\(stats.by_type)")
        #expect(stats.valid == stats.accepted && stats.order_violations == 0 && stats.duplicate_ids_with_other_body == 0)
        let metrics = try RawHTTP.exchange(port: server.port, method: "GET", path: "/metrics").body
        #expect(metrics.contains("churnwatch_webhook_attempts_total{endpoint=\"all\",result=\"delivered\"}"), "\(metrics.suffix(600))")
        let stopped = try await server.stop()
        #expect(stopped.status == 0, "\(stopped.stderr.suffix(300))")

        // Each message says what its row says.
        let sample = try receiver.records().filter { $0["type"] as? String == "churn_event.created" }.prefix(20)
        for record in sample {
            let data = (record["body"] as? [String: Any])?["data"] as? [String: Any] ?? [:]
            let id = (data["event_id"] as? Int).map(Int64.init) ?? -1
            let row = try db.query("SELECT original_transaction_id, event FROM churnwatch.churn_events WHERE id = \(id)").first
            #expect(try row?.decode(String.self, "original_transaction_id") == data["original_transaction_id"] as? String)
            #expect(try row?.decode(String.self, "event") == data["event"] as? String)
        }
        try await Self.campaignConsumer(world: world, db: db, receiver: receiver)
    }

    static func campaignConsumer(world: E2E.World, db: PostgresConnection, receiver: WebhookReceiverProcess) async throws {
        let env = world.env
        let add = try await CLIRunner.run(["webhooks", "add", "braze", "--url", "http://127.0.0.1:\(receiver.port)/braze", "--campaign", "save_offer",
                                           "--types", "winback.ready", "--allow-http", "--allow-private"], environment: env)
        #expect(add.status == 0, "\(add.stderr)")
        let secret = add.stdout.split(separator: "\n").first { $0.hasPrefix("secret: ") }.map { String($0.dropFirst(8)) } ?? ""
        let braze = try WebhookReceiverProcess.start(secrets: [secret])
        defer { braze.stop() }
        _ = try await CLIRunner.run(["webhooks", "set", "braze", "--url", "http://127.0.0.1:\(braze.port)/braze"], environment: env)
        let refused = try await CLIRunner.run(["winback", "claim", "--campaign", "save_offer", "--consumer", "m"], environment: env)
        #expect(refused.status == 78 && refused.stderr.contains("braze"), "\(refused.stderr)")
        let at = E2E.start.addingTimeInterval(3 * E2E.day + 3600)
        let due = try count(db, """
            SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer' AND status = 'pending'
              AND not_before <= \(at) AND (expires_at IS NULL OR expires_at > \(at))
            """)
        try #require(due > 0, "no save_offer entry due")
        let send = try await CLIRunner.run(["webhooks", "send", "--as-of", E2E.iso(at)], environment: env)
        #expect(send.status == 0 && send.stdout.contains("\(due) delivered"), "\(send.stdout) \(send.stderr.suffix(300))")
        let records = try braze.records().filter { $0["status"] as? Int == 200 }
        #expect(records.count == due && records.allSatisfy { $0["valid"] as? Bool == true && $0["type"] as? String == "winback.ready" })
        let ids = records.compactMap { (($0["body"] as? [String: Any])?["data"] as? [String: Any])?["id"] as? Int }
        let offers = records.compactMap { (($0["body"] as? [String: Any])?["data"] as? [String: Any])?["offer"] as? [String: Any] }
        #expect(offers.count == due && offers.allSatisfy { ($0["signature"] as? String)?.isEmpty == false && $0["offer_id"] as? String == "save50" })
        #expect(try count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE id = ANY(\(ids.map(Int64.init))) AND status = 'done' AND claimed_by = 'webhook:braze'") == due)
        #expect(try count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE id = ANY(\(ids.map(Int64.init))) AND holdout") == 0)
    }
}
