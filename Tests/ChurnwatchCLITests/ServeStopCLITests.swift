import Foundation
import Postgres
import Testing

/// `--shutdown-grace` bounds serve's whole stop, even with a backlog in the inbox and the
/// applier's batch stuck in the database; what was not applied is applied by the next start.
@Suite("churnwatch serve: a bounded stop", .serialized)
struct ServeStopCLITests {
    typealias E2E = NightlyRunEndToEndTests
    typealias Feed = NotificationFeedCLITests
    typealias Serve = ServeCLITests
    static let day = E2E.day

    /// Waits until `condition` holds, checking every 50 ms, for at most `seconds` (the bound only
    /// turns a hang into a failure; the test waits on the condition, not on the clock).
    static func until(_ seconds: TimeInterval, _ condition: () throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test("a backlog of 450+ rows and the applier's second batch held by a row lock: SIGTERM ends serve within --shutdown-grace (exit 0, saying the batch stays in the inbox), what committed before stays, the rest pending; the next start applies every row once")
    func stopIsBoundedWithABacklog() async throws {
        let world = try await E2E.World.make(subscribers: 1_200, seed: 48, populationLead: 45 * Self.day)
        defer { world.close() }
        let asOf = Feed.asOf
        try world.sim.setClock(E2E.iso(asOf))
        let payloads = try await Feed.payloads(world, from: asOf.addingTimeInterval(-30 * Self.day), to: asOf)
        try #require(payloads.count > 450, "only \(payloads.count) notifications in 30 days")
        let db = try world.connect()
        for p in payloads { try db.execute("INSERT INTO churnwatch.notification_inbox (signed_payload) VALUES (\(p))") }
        let ids = try db.query("SELECT id FROM churnwatch.notification_inbox ORDER BY id").map { try $0.decode(Int64.self, at: 0) }
        // serve's applier takes 200 rows a batch: the second batch's commit waits on this lock.
        let holder = try world.connect()
        try holder.execute("BEGIN")
        try holder.execute("SELECT 1 FROM churnwatch.notification_inbox WHERE id = \(ids[250]) FOR UPDATE")

        let server = try await Serve.Server.start(world.env, extra: ["--shutdown-grace", "2s"])
        defer { server.kill() }
        let processed: () throws -> Int = { try Serve.count(db, "SELECT count(*) FROM churnwatch.notification_inbox WHERE processed_at IS NOT NULL") }
        // A lock wait in this database (the cluster is shared with other suites' databases),
        // once the first batch committed.
        let blocked = try await Self.until(120) {
            try Serve.count(db, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()") > 0
                && processed() >= 200
        }
        // The first batch committed; of the second, the lane without the locked row committed
        // its share (lanes split by subscription), the other waits.
        let seen = try processed()
        #expect(blocked && seen >= 200 && seen < ids.count, "the applier did not apply its first batch and wait on the lock: \(seen) processed")
        server.process.signal(SIGTERM)
        // Before the bound, serve waited for the stuck batch for ever: a minute turns that into a failure.
        let stopped = try await server.process.waitForStderr(containing: "churnwatch serve: stopped", timeout: 60)
        #expect(stopped, "serve did not stop with its applier's batch stuck")
        if !stopped { server.kill() }
        let ended = try await server.process.wait()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
        #expect(ended.stderr.contains("did not end within --shutdown-grace"), "\(ended.stderr.suffix(600))")
        try holder.execute("ROLLBACK")
        // The stuck lane's transaction ended with the process: the locked row is still pending.
        let lockedRow = try Serve.count(db, "SELECT count(*) FROM churnwatch.notification_inbox WHERE id = \(ids[250]) AND processed_at IS NULL")
        let after = try processed()
        #expect(lockedRow == 1 && after < ids.count, "the stuck batch was not rolled back with the process")

        let again = try await Serve.Server.start(world.env)
        defer { again.kill() }
        #expect(try await Serve.applied(db, within: 120), "the next start left rows unapplied")
        let restarted = try await again.stop()
        #expect(restarted.status == 0, "\(restarted.stderr.suffix(600))")
        let uuids = try Serve.count(db, "SELECT count(DISTINCT notification_uuid) FROM churnwatch.notifications")
        #expect(uuids == Set(payloads).count, "every notification recorded once")
        #expect(try Serve.count(db, "SELECT count(*) FROM churnwatch.notification_inbox WHERE outcome IS NULL") == 0)
    }
}
