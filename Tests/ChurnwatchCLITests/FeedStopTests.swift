import Foundation
import Postgres
import Testing

/// The change feed's sync obeys the night's stops (issue 29): SIGTERM, `--shutdown-grace` and
/// `--max-duration` end it between pages, alone or inside `run`, with exit 75; the next sync
/// resumes from the stored cursor and ends as one uninterrupted sync would.
@Suite("the change feed's sync stops when told", .serialized)
struct FeedStopTests {
    typealias E2E = NightlyRunEndToEndTests
    static let day = E2E.day
    static let asOf = E2E.start

    /// History pages the simulator has been asked for so far (both environments).
    static func pagesAsked(_ world: E2E.World) throws -> Int {
        let stats = try JSONSerialization.jsonObject(with: try world.sim.request("GET", "/_sim/stats")) as? [String: Any]
        let byStatus = (stats?["requests"] as? [String: Any])?["notification_history"] as? [String: Int]
        return byStatus?.values.reduce(0, +) ?? 0
    }

    /// Starts `arguments`, waits until the sync has asked for `pages` pages, sends SIGTERM and waits for the exit.
    static func terminated(_ world: E2E.World, _ arguments: [String], env: [String: String], afterPages pages: Int) async throws -> Harness.Ended {
        try await OwnThread.run {
            let p = try RunningCLI(arguments, environment: env)
            _ = try Harness.waitUntil(timeout: 120) { try pagesAsked(world) >= pages || !p.process.isRunning }
            return Harness.signalAndWait(p, SIGTERM)
        }
    }

    @Test("SIGTERM in a slow first sync: `notifications sync` and `run` exit 75 within the grace and one page; --max-duration the same; each re-run resumes, and the end is every notification recorded once")
    func stopsBetweenPages() async throws {
        let world = try await E2E.World.make(subscribers: 500, seed: 43, simFlags: ["--latency-ms", "700"], populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        try world.sim.setClock(E2E.iso(Self.asOf))
        var env = world.env
        env["CHURNWATCH_NOTIFICATIONS_LOOKBACK"] = "40d"
        env["CHURNWATCH_NOTIFICATIONS"] = "on"
        let at = ["--as-of", E2E.iso(Self.asOf)]

        let sync = try await Self.terminated(world, ["notifications", "sync", "--shutdown-grace", "1s"] + at, env: env, afterPages: 2)
        #expect(sync.result.status == 75, "\(sync.result.stdout) \(sync.result.stderr.suffix(400))")
        #expect(sync.result.stderr.contains("stopped: signal"), "\(sync.result.stderr.suffix(400))")
        // The grace (1 s) and one page (0.7 s) bound it; before, the sync read on to its end.
        #expect(sync.afterSignal < 12, "exit \(sync.afterSignal) s after SIGTERM")

        let run = try await Self.terminated(world, ["run", "--shutdown-grace", "1s", "--status-rate", "5000", "--history-rate", "5000"] + at,
                                            env: env, afterPages: Self.pagesAsked(world) + 1)
        #expect(run.result.status == 75, "\(run.result.stdout) \(run.result.stderr.suffix(400))")
        #expect(run.result.stderr.contains("stopped before planning"), "\(run.result.stderr.suffix(400))")
        #expect(run.afterSignal < 12, "exit \(run.afterSignal) s after SIGTERM")
        #expect(try db.query("SELECT count(*) FROM churnwatch.runs")[0].decode(Int.self, at: 0) == 0, "nothing planned")

        let budget = try await CLIRunner.run(["notifications", "sync", "--max-duration", "2s", "--shutdown-grace", "1s"] + at, environment: env)
        #expect(budget.status == 75 && budget.stderr.contains("time budget"), "\(budget.stdout) \(budget.stderr.suffix(400))")

        let rest = try await CLIRunner.run(["notifications", "sync"] + at, environment: env)
        #expect(rest.status == 0, "\(rest.stderr.suffix(400))")
        let recorded = try db.query("SELECT count(*) FROM churnwatch.notifications")[0].decode(Int.self, at: 0)
        let expected = try await NotificationFeedCLITests.bothHistories(world, asOf: Self.asOf, lookbackDays: 40)
        #expect(recorded == expected.count, "recorded \(recorded), the histories hold \(expected.count)")
        print("feed stops: \(recorded) notifications in \(try Self.pagesAsked(world)) pages asked; SIGTERM to exit \(sync.afterSignal) s (sync), \(run.afterSignal) s (run)")
        #expect(try db.query("SELECT count(*) FROM churnwatch.churn_events")[0].decode(Int.self, at: 0) == 0,
                "a first sync, however often it was cut, writes no events")
    }
}
