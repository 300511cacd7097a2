@testable import ChurnServe
import ChurnStore
import Foundation
import Logging
import Synchronization
import Testing

/// serve's parts as one `ServiceGroup`, in-process on port 0: ready once running, stopped in
/// order (the door, then the applier, then the recorder), the stop bounded by one grace. What
/// happens to the inbox's backlog at the stop is `ServeStopCLITests`'s (the binary, a database).
@Suite("serve's lifecycle, in-process", .timeLimit(.minutes(1)))
struct ServeGroupTests {
    /// A request the test holds open: answered once ``open()`` is called.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
        func open() {
            let waiters = state.withLock { s in
                s.open = true
                defer { s.waiters = [] }
                return s.waiters
            }
            for w in waiters { w.resume() }
        }
        func wait() async {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if !s.open { s.waiters.append(c) }
                    return s.open
                }
                if now { c.resume() }
            }
        }
    }

    struct Running {
        let serve: ServeGroup
        let door: HTTPDoor
        let outcome: Task<ServeGroup.Outcome, any Error>
    }

    static let silent = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    /// serve's parts with no app (a database nobody listens on: the applier's rounds fail and
    /// are retried), the door on port 0 answering `/held` after `gate` and anything else 200.
    static func start(gate: Gate, grace: Duration) async throws -> Running {
        let database = DatabaseStore(connectionString: "postgresql://postgres@127.0.0.1:1/x", connections: 1, logger: silent, databaseLogger: silent)
        let apps = ServeApps(ServeApps.Loaded()) { _ in ServeApps.Loaded() }
        let metrics = ServeMetrics(door: DoorCounters())
        let applier = InboxApplier(apps: apps, database: database, metrics: metrics, health: ServeHealth { }, logger: silent)
        let retention = RetentionAnswerer(settings: .init(), metrics: RetentionMetrics(), logger: silent) { _ in .unknown }
        let door = try await HTTPDoor.start(host: "127.0.0.1", port: 0, limits: DoorLimits(), tls: nil, counters: metrics.door) { request in
            if request.path == "/held" { await gate.wait() }
            return .text(200, "ok")
        }
        let ready = Gate()
        let serve = ServeGroup(door: door, applier: applier, retention: retention, grace: grace, signals: [], logger: silent) { ready.open() }
        let outcome = Task { try await serve.run() }
        await ready.wait()
        return Running(serve: serve, door: door, outcome: outcome)
    }

    /// A blocking socket exchange on a thread of its own, not one of the few threads that run
    /// every task (the door's handlers need those).
    static func exchange(_ port: Int, _ method: String, _ path: String) async throws -> Int? {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Int?, any Error>) in
            Thread.detachNewThread { c.resume(with: Result { try RawHTTP.exchange(port: port, method: method, path: path).status }) }
        }
    }

    /// Waits for `condition`, checked every 10 ms (a condition, not a clock: the suite's time limit bounds it).
    static func until(_ condition: () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(10)) }
    }

    @Test("on port 0, ready once running; the stop stops accepting, answers the request in flight, then ends every part: idle, applier stopped, all recorded")
    func stopAnswersWhatIsInFlight() async throws {
        let gate = Gate()
        let s = try await Self.start(gate: gate, grace: .seconds(30))
        #expect(s.door.port > 0)
        #expect(try await Self.exchange(s.door.port, "GET", "/other") == 200)

        let held = Task { try await Self.exchange(s.door.port, "POST", "/held") }
        try await Self.until { s.door.counters.inFlight.load(ordering: .relaxed) == 1 }
        await s.serve.group.triggerGracefulShutdown()
        // Draining: no new connection is taken.
        try await Self.until { (try? RawHTTP(port: s.door.port, timeout: 1)) == nil }  // connect refused at once: no wait
        gate.open()
        #expect(try await held.value == 200, "the request in flight at the stop is answered")
        let outcome = try await s.outcome.value
        #expect(outcome == ServeGroup.Outcome(idle: true, applierStopped: true, recorded: true))
    }

    @Test("a request that is never answered does not hold the stop past the grace: the group ends, saying it was not idle")
    func theGraceBoundsTheStop() async throws {
        let gate = Gate()
        defer { gate.open() }
        let s = try await Self.start(gate: gate, grace: .milliseconds(300))
        let held = Task { try? await Self.exchange(s.door.port, "POST", "/held") }
        try await Self.until { s.door.counters.inFlight.load(ordering: .relaxed) == 1 }
        await s.serve.group.triggerGracefulShutdown()
        // Returns although the held request never ends (the suite's time limit would say otherwise).
        let outcome = try await s.outcome.value
        #expect(!outcome.idle, "\(outcome)")
        #expect(s.door.counters.inFlight.load(ordering: .relaxed) == 1, "the held request was still in flight at the end")
        _ = held
    }
}
