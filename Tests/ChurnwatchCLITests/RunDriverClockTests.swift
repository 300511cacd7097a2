import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Polling
import Synchronization
import Testing

/// A clock on which time passes only when the engine waits: each `sleep(until:)` moves it to the
/// deadline at once. The engine's time is then independent of the wall clock, so a rule the
/// driver timed with the wall clock instead would never fire.
final class JumpingRunClock: RunClock {
    private let time: Mutex<Date>
    init(_ start: Date) { time = Mutex(start) }

    func now() -> Date { time.withLock { $0 } }

    func sleep(until deadline: Date) async throws {
        try Task.checkCancellation()
        time.withLock { $0 = max($0, deadline) }
        await Task.yield()
    }
}

/// The run engine's driver in-process, on an injected clock, against a real PostgreSQL and the
/// simulator (the rules themselves are unit-tested in PollingTests).
@Suite("the run engine's driver on a test clock")
struct RunDriverClockTests {
    typealias World = NightlyRunEndToEndTests.World
    static let start = NightlyRunEndToEndTests.start

    @Test("the time budget is the injected clock's: an hour on it interrupts the run; the next run resumes it, polling each subscription not yet written once")
    func timeBudgetOnTheInjectedClock() async throws {
        let world = try await World.make(subscribers: 1000, seed: 43, simFlags: ["--receipt-share", "0"])
        defer { world.close() }
        try world.sim.setClock(NightlyRunEndToEndTests.iso(Self.start))
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let config = try AppStoreConfiguration.fromEnvironment(world.env)
        let store = try await DatabaseStore(connectionString: try #require(world.env["DATABASE_URL"]), connections: 4, logger: logger, databaseLogger: logger)
            .app(config.bundleId)
        let client = AppStoreServerAPIClient(configuration: config, logger: logger)
        var options = RunOptions(asOf: Self.start)
        options.concurrency = 8
        options.batchSize = 8
        options.maxDuration = 3600
        let clock = JumpingRunClock(Date())
        let began = clock.now()
        let engine = RunEngine(store: store, poller: SubscriptionPoller(client: client), options: options, logger: logger, clock: clock)
        let outcome = try await engine.run()
        guard case .stopped(let runId?, let stop) = outcome, stop == .timeBudget else {
            Issue.record("expected the time budget to interrupt the run, got \(outcome)")
            return
        }
        #expect(clock.now().timeIntervalSince(began) >= 3600, "the budget ended before the clock passed it")
        let db = try world.connect()
        let polledFirst = try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(runId) AND status = 'done'")[0].decode(Int.self, at: 0)
        let due = try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(runId)")[0].decode(Int.self, at: 0)
        #expect(polledFirst < due, "the whole run was polled within an hour on the test clock: \(polledFirst) of \(due)")
        #expect(due == 1000, "every never-polled subscription is due on the first night")
        // On this clock the shutdown grace passes at once too, so a batch in flight when the budget
        // ended may be given up after its calls were made (and polled again by the resume).
        let callsFirst = try world.sim.stats().requests["subscriptions"]?.values.reduce(0, +) ?? 0

        // The CLI resumes the same run on the wall clock and finishes it.
        let r = try await world.night(Self.start)
        #expect(r.status == 0, "\(r.stderr.suffix(500))")
        let items = try db.query("SELECT status, count(*) FROM churnwatch.run_items WHERE run_id = \(runId) GROUP BY status")
            .map { (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1)) }
        #expect(items.count == 1 && items.first?.0 == "done" && items.first?.1 == due, "\(items)")
        #expect(try db.query("SELECT count(*) FROM churnwatch.runs")[0].decode(Int.self, at: 0) == 1, "resumed, not planned again")
        let statusCalls = try world.sim.stats().requests["subscriptions"]?.values.reduce(0, +) ?? 0
        #expect(statusCalls - callsFirst == due - polledFirst,
                "the resume reads the status of each subscription not yet written, once: \(statusCalls - callsFirst) calls for \(due - polledFirst)")
    }
}
