import AppStoreModels
import AppStoreServerAPI
import Foundation
import Logging
import Postgres
import Testing

/// The simulator delivering notifications to `churnwatch serve` as Apple does, beside a nightly run.
@Suite("churnwatch serve: the simulator delivers as Apple does", .serialized)
struct ServeDeliveryCLITests {
    typealias E2E = NightlyRunEndToEndTests
    typealias Feed = NotificationFeedCLITests

    struct Deliveries: Decodable {
        var idle: Bool
        var attempts: Int
        var failed: Int
        var delivered: [String]
    }

    /// The simulator's deliveries once it attempted everything due by its clock (bounded wait).
    static func settled(_ sim: SimulatorProcess) async throws -> Deliveries {
        let deadline = Date().addingTimeInterval(120)
        while true {
            let d = try JSONDecoder().decode(Deliveries.self, from: try sim.request("GET", "/_sim/deliveries"))
            if d.idle || Date() > deadline { return d }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    @Test("45 days of notifications delivered to serve while the first night runs, a fifth of the attempts dropped: every one delivered is recorded once, dropped ones are retried on Apple's schedule and shown in sendAttempts, and the history sync afterwards fills in the rest with nothing recorded twice")
    func deliveredBesideANight() async throws {
        // The simulator first (serve needs its keys), delivering nowhere yet: its clock has not
        // moved, so nothing is due. Then serve on a port of its own choosing, and the simulator
        // told where it listens: no port is picked before a server holds it.
        let world = try await E2E.World.make(subscribers: 300, seed: 51, simFlags: [
            "--notification-url", "http://127.0.0.1:9/not-yet", "--drop-deliveries", "0.2",
        ], populationLead: 45 * E2E.day)
        defer { world.close() }
        let server = try await ServeCLITests.Server.start(world.env)
        defer { server.kill() }
        _ = try world.sim.request("POST", "/_sim/deliveries/url?url=http://127.0.0.1:\(server.port)/apple/notifications")
        let asOf = Feed.asOf
        // The clock moves to the night: the simulator delivers what was signed since its start
        // while the run polls the same subscriptions.
        let night = try await world.night(asOf.addingTimeInterval(-3 * E2E.day), extra: ["--notifications", "off"])
        #expect(night.status == 0, "\(night.stderr.suffix(400))")
        try world.sim.setClock(E2E.iso(asOf))
        let deliveries = try await Self.settled(world.sim)
        #expect(deliveries.idle, "the simulator never finished delivering")
        #expect(deliveries.failed > 0 && deliveries.delivered.count > 50, "\(deliveries.attempts) attempts, \(deliveries.failed) dropped, \(deliveries.delivered.count) delivered")
        let db = try world.connect()
        #expect(try await ServeCLITests.applied(db, within: 60), "the applier left inbox rows unapplied")
        let recorded = try db.query("SELECT notification_uuid::text FROM churnwatch.notifications WHERE source = 'inbox'")
            .map { try $0.decode(String.self, at: 0).lowercased() }
        #expect(Set(recorded) == Set(deliveries.delivered.map { $0.lowercased() }), "recorded \(recorded.count), delivered \(deliveries.delivered.count)")
        #expect(recorded.count == Set(recorded).count)

        // Retries: the next hour of the clock brings a second attempt of each dropped one.
        try world.sim.setClock(E2E.iso(asOf.addingTimeInterval(3600 + 60)))
        let retried = try await Self.settled(world.sim)
        #expect(retried.attempts > deliveries.attempts, "no retry was attempted an hour later")

        // The history shows each attempt: a dropped first attempt, then the retry's success.
        let results = try await Self.sendAttempts(world, from: asOf.addingTimeInterval(-10 * E2E.day), to: asOf.addingTimeInterval(3600 + 60))
        #expect(results.contains(["NO_RESPONSE", "SUCCESS"]), "no retried delivery in the history: \(Set(results).prefix(5))")
        #expect(results.contains(["SUCCESS"]))

        // The net: the history sync records every notification Apple holds, each once.
        var env = world.env
        env["CHURNWATCH_NOTIFICATIONS_LOOKBACK"] = "60d"
        let sync = try await CLIRunner.run(["notifications", "sync", "--as-of", E2E.iso(asOf.addingTimeInterval(3600 + 60))], environment: env)
        #expect(sync.status == 0, "\(sync.stderr.suffix(400))")
        #expect(try await ServeCLITests.applied(db, within: 60))
        let history = try await Feed.bothHistories(world, asOf: asOf.addingTimeInterval(3600 + 60), lookbackDays: 60)
        // Apple's histories (Sandbox keeps 30 days) and what was delivered (older Sandbox ones too).
        let held = Set(try history.map { jws -> String in
            let claims = try JSONSerialization.jsonObject(with: ServeCLITests.base64URL(String(jws.split(separator: ".")[1]))) as? [String: Any]
            return try #require(claims?["notificationUUID"] as? String).lowercased()
        })
        let expected = held.union(retried.delivered.map { $0.lowercased() })
        let all = try db.query("SELECT notification_uuid::text FROM churnwatch.notifications").map { try $0.decode(String.self, at: 0).lowercased() }
        #expect(all.count == Set(all).count && Set(all) == expected,
                "\(all.count) recorded, \(expected.count) expected; missing \(expected.subtracting(all).prefix(3)), extra \(Set(all).subtracting(expected).prefix(3))")
        print("delivered \(retried.delivered.count) of \(history.count) notifications to serve, \(retried.failed) attempts dropped, \(recorded.count) recorded by serve before the sync")
        let ended = try await server.stop()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
    }

    /// Each history record's `sendAttempts` results, in order, read with churnwatch's client.
    static func sendAttempts(_ world: E2E.World, from: Date, to: Date) async throws -> [[String]] {
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let client = AppStoreServerAPIClient(configuration: try AppStoreConfiguration.fromEnvironment(world.env), logger: logger)
        let request = NotificationHistoryRequest(startDate: EpochMilliseconds(from), endDate: EpochMilliseconds(to))
        var out: [[String]] = [], token: String?
        repeat {
            let page = try #require(await client.notificationHistoryPage(request, paginationToken: token, environment: .production).value)
            out += page.records.map { ($0.sendAttempts ?? []).compactMap(\.sendAttemptResult) }
            token = page.paginationToken
        } while token != nil
        return out
    }
}
