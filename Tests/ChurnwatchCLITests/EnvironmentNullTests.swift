import Foundation
import Postgres
import Testing

/// subscriptions.environment NULL means "the configured environment" (issue 19, item 5;
/// migration 0005): an app that inserts rows without one into a Sandbox deployment costs no
/// extra call per row.
@Suite("rows registered without an environment (the binary)")
struct EnvironmentNullTests {
    @Test("in a Sandbox deployment, rows an app inserts without an environment are asked of Sandbox only")
    func sandboxRowsWithoutEnvironmentCostNoExtraCall() async throws {
        let start = NightlyRunEndToEndTests.start
        let sim = try await SimulatorProcess.start(subscribers: 40, seed: 23, start: NightlyRunEndToEndTests.iso(start),
                                                   extra: ["--environment", "Sandbox"])
        defer { sim.stop() }
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        var env = sim.environment
        env["DATABASE_URL"] = db.connectionURL
        #expect(env["APPSTORE_ENVIRONMENT"] == "Sandbox")
        let migrate = try await CLIRunner.run(["migrate"], environment: env)
        try #require(migrate.status == 0, "\(migrate.stderr)")

        // The app's own insert: only the id (docs/contracts.md), ON CONFLICT DO NOTHING.
        let ids = try await OwnThread.run { try sim.truth(at: NightlyRunEndToEndTests.iso(start)).keys.sorted() }
        try #require(ids.count == 40)
        let connection = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        for id in ids {
            try connection.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id) VALUES (\(id)) ON CONFLICT DO NOTHING")
        }
        let unset = try connection.query("SELECT count(*) FROM churnwatch.subscriptions WHERE environment IS NULL")[0].decode(Int.self, at: 0)
        #expect(unset == 40, "a row inserted without an environment has none (no default)")

        let run = try await CLIRunner.run(["run", "--as-of", NightlyRunEndToEndTests.iso(start), "--log-format", "json"], environment: env)
        #expect(run.status == 0, "\(run.stderr.suffix(600))")
        let stats = try await OwnThread.run { try sim.stats() }
        let status = stats.requests["subscriptions"] ?? [:]
        #expect(status["404"] == nil, "no row was asked of Production first: \(status)")
        #expect(status.values.reduce(0, +) == 40, "one status call per subscription: \(status)")
        let polled = try connection.query("""
            SELECT count(*) FILTER (WHERE last_outcome = 'ok'), count(*) FILTER (WHERE environment = 'Sandbox')
            FROM churnwatch.subscriptions
            """)[0]
        #expect(try polled.decode(Int.self, at: 0) == 40 && polled.decode(Int.self, at: 1) == 40)
        let quarantined = try connection.query("SELECT count(*) FROM churnwatch.quarantine")[0].decode(Int.self, at: 0)
        #expect(quarantined == 0)
    }
}
