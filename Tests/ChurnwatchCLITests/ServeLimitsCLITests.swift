import Foundation
import Postgres
import Testing

/// `churnwatch serve` as a public door: bodies, slow clients, too many connections, the
/// database going away, SIGTERM with a request in flight.
@Suite("churnwatch serve: limits and the database down", .serialized)
struct ServeLimitsCLITests {
    typealias Server = ServeCLITests.Server
    typealias E2E = NightlyRunEndToEndTests

    @Test("a 10 MB body (declared, or chunked past the cap) is a 413 read no further; a body that stops coming is a 408 after --body-timeout; headers that stop coming close the connection; past --max-connections a connection is closed at once, and one is served again when others close")
    func publicDoor() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let sim = try await SimulatorProcess.start(subscribers: 20, seed: 3, start: E2E.iso(E2E.start))
        defer { sim.stop() }
        var env = sim.environment
        env["DATABASE_URL"] = db.connectionURL
        #expect(try await CLIRunner.run(["migrate"], environment: env).status == 0)
        let server = try await Server.start(env, extra: ["--body-timeout", "1s", "--header-timeout", "2s", "--max-connections", "4"])

        let declared = try RawHTTP(port: server.port)
        declared.send("POST /apple/notifications HTTP/1.1\r\nHost: t\r\nContent-Length: 10485760\r\n\r\n")
        let big = declared.readToClose()
        #expect(RawHTTP.status(big) == 413, "\(big ?? "timeout")")

        let chunked = try RawHTTP(port: server.port)
        chunked.send("POST /apple/notifications HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        let chunk = String(repeating: "A", count: 16_384)
        for _ in 0..<5 { chunked.send(String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n") }
        let over = chunked.readToClose()
        #expect(RawHTTP.status(over) == 413, "\(over ?? "timeout")")

        let slowBody = try RawHTTP(port: server.port)
        let started = Date()
        slowBody.send("POST /apple/notifications HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n{\"signedPayload\"")
        let late = slowBody.readToClose()
        #expect(RawHTTP.status(late) == 408, "\(late ?? "timeout")")
        #expect(Date().timeIntervalSince(started) < 10, "the 408 came after \(Date().timeIntervalSince(started)) s")

        let slowHeaders = try RawHTTP(port: server.port)
        slowHeaders.send("POST /apple/notifications HTTP/1.1\r\nHost: t\r\n")
        #expect(slowHeaders.readToClose() == "", "a connection whose headers never end is closed without an answer")

        // The cap: four idle connections held, a fifth is closed at once.
        let held = try (0..<4).map { _ in try RawHTTP(port: server.port) }
        let health = try RawHTTP(port: server.port, timeout: 5)
        health.send("GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        #expect(health.readToClose() == "", "a connection past the cap was served")
        _ = held.count
        let freed = held.map { $0.readToClose() }
        #expect(freed.allSatisfy { $0 == "" }, "idle connections are closed after --header-timeout")
        let after = try RawHTTP.exchange(port: server.port, method: "GET", path: "/healthz")
        #expect(after.status == 200, "\(after)")

        let ended = try await server.stop()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
    }

    @Test("the database down: a verified notification is a 503 (never a 200), /healthz says why within its budget; back up, serve recovers by itself: the same notification is a 200 and applied once")
    func databaseDown() async throws {
        let cluster = try PrivateCluster.start()
        defer { cluster.destroy() }
        let sim = try await SimulatorProcess.start(subscribers: 300, seed: 5, start: E2E.iso(E2E.start.addingTimeInterval(-45 * E2E.day)))
        defer { sim.stop() }
        var env = sim.environment
        env["DATABASE_URL"] = cluster.url
        #expect(try await CLIRunner.run(["migrate"], environment: env).status == 0)
        #expect(try await CLIRunner.run(["import", sim.subscriptionsCSV.path], environment: env).status == 0)
        try sim.setClock(E2E.iso(NotificationFeedCLITests.asOf))
        let world = E2E.World(sim: sim, db: try ScratchDatabase.create(), env: env)
        defer { world.db.drop() }
        let asOf = NotificationFeedCLITests.asOf
        let payloads = try await NotificationFeedCLITests.payloads(world, from: asOf.addingTimeInterval(-2 * E2E.day), to: asOf)
        #expect(payloads.count >= 4, "only \(payloads.count) notifications")
        let server = try await Server.start(env, extra: ["--store-within", "2s"])
        #expect(try server.post(payloads[0]).status == 200)

        try cluster.stop()
        let refused = try server.post(payloads[1])
        #expect(refused.status == 503, "\(refused)")
        let started = Date()
        let health = try RawHTTP.exchange(port: server.port, method: "GET", path: "/healthz")
        #expect(health.status == 503 && health.body.hasPrefix("database: "), "\(health)")
        #expect(Date().timeIntervalSince(started) < 5, "/healthz took \(Date().timeIntervalSince(started)) s with the database down")

        try cluster.startAgain()
        let stored = try server.post(payloads[1])
        #expect(stored.status == 200, "\(stored)")
        for p in payloads.dropFirst(2) { #expect(try server.post(p).status == 200) }
        let db = try PostgresConnection(connectionString: cluster.url, logger: .postgres)
        #expect(try await ServeCLITests.applied(db, within: 30), "the applier did not recover")
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.notifications") == payloads.count)
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.notification_inbox") == payloads.count)
        let ended = try await server.stop()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
    }

    @Test("SIGTERM with a notification in flight (its insert waiting on a lock): serve stops accepting, answers it 200 once it is stored, and exits 0")
    func drainAnswersInFlight() async throws {
        let world = try await E2E.World.make(subscribers: 200, seed: 13, populationLead: 45 * E2E.day)
        defer { world.close() }
        let asOf = NotificationFeedCLITests.asOf
        try world.sim.setClock(E2E.iso(asOf))
        let payloads = try await NotificationFeedCLITests.payloads(world, from: asOf.addingTimeInterval(-3 * E2E.day), to: asOf)
        let payload = try #require(payloads.first)
        let server = try await Server.start(world.env, extra: ["--store-within", "60s", "--shutdown-grace", "60s"])
        let locker = try world.connect()
        try locker.execute("BEGIN")
        try locker.execute("LOCK TABLE churnwatch.notification_inbox IN EXCLUSIVE MODE")
        let answer = Task { try await OwnThread.run { try server.post(payload) } }
        let watcher = try world.connect()
        let deadline = Date().addingTimeInterval(30)
        var waiting = false
        while !waiting, Date() < deadline {
            waiting = try ServeCLITests.count(watcher, """
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO churnwatch.notification_inbox%'
                """) > 0
            if !waiting { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(waiting, "serve's insert never waited on the lock")
        server.process.signal(SIGTERM)
        #expect(try await server.process.waitForStderr(containing: "stopping", timeout: 10), "\(server.process.stderr.suffix(400))")
        #expect(server.process.process.isRunning, "serve exited with a request in flight")
        try locker.execute("COMMIT")
        let answered = try await answer.value
        #expect(answered.status == 200, "\(answered)")
        let ended = try await server.process.wait()
        #expect(ended.status == 0, "\(ended.stderr.suffix(600))")
        #expect(try ServeCLITests.count(watcher, "SELECT count(*) FROM churnwatch.notification_inbox") == 1)
    }
}
