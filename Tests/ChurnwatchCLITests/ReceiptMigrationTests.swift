import Foundation
import Postgres
import Testing

/// Legacy receipts onto the App Store Server API (issue 19, item 3): a subscriber registered
/// with a receipt alone is asked of verifyReceipt once, to learn its id, and through the Server
/// API from its second poll on; one registered with an id and a receipt from its first; another
/// app's receipt changes nothing and goes to quarantine.
@Suite("legacy receipts onto the Server API (the binary)", .serialized)
struct ReceiptMigrationTests {
    static let start = NightlyRunEndToEndTests.start
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }

    /// The simulator's Production subscribers with receipt data: (id, receipt).
    static func receiptRows(_ sim: SimulatorProcess) throws -> [(id: String, receipt: String)] {
        let lines = try String(contentsOf: sim.subscriptionsCSV, encoding: .utf8).split(separator: "\n").dropFirst()
        return lines.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            .filter { $0.count >= 5 && !$0[4].isEmpty && $0[3] == "Production" }
            .map { ($0[0], $0[4]) }
    }

    static func requests(_ sim: SimulatorProcess, _ endpoint: String) async throws -> Int {
        try await OwnThread.run { try sim.stats() }.requests[endpoint]?.values.reduce(0, +) ?? 0
    }

    static func scratch(_ sim: SimulatorProcess, csv: String, bundleId: String? = nil) async throws -> (ScratchDatabase, [String: String]) {
        let db = try ScratchDatabase.create()
        var env = sim.environment
        env["DATABASE_URL"] = db.connectionURL
        if let bundleId { env["APPSTORE_BUNDLE_ID"] = bundleId }
        let migrate = try await CLIRunner.run(["migrate"], environment: env)
        guard migrate.status == 0 else { db.drop(); throw CLITestError("migrate: \(migrate.stderr)") }
        let file = sim.directory.appendingPathComponent("import-\(UUID().uuidString.prefix(6)).csv")
        try Data(csv.utf8).write(to: file)
        let imported = try await CLIRunner.run(["import", file.path], environment: env)
        guard imported.status == 0 else { db.drop(); throw CLITestError("import: \(imported.stdout) \(imported.stderr)") }
        return (db, env)
    }

    @Test("a receipt alone: verifyReceipt once to learn the id, then the Server API; an id with a receipt: the Server API from the first poll")
    func receiptsMoveToTheServerAPI() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 200, seed: 31, start: Self.iso(Self.start))
        defer { sim.stop() }
        let rows = try Self.receiptRows(sim)
        try #require(rows.count >= 2, "the simulator's population has Production receipts")
        let (alone, withId) = (rows[0], rows[1])
        let header = "original_transaction_id,app_account_token,customer_ref,environment,receipt_data\n"
        let (db, env) = try await Self.scratch(sim, csv: header + ",,alone,,\(alone.receipt)\n\(withId.id),,with-id,,\(withId.receipt)\n")
        defer { db.drop() }
        let connection = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        let keys = try connection.query("SELECT original_transaction_id FROM churnwatch.subscriptions ORDER BY customer_ref")
            .map { try $0.decode(String.self, at: 0) }
        #expect(keys.count == 2 && keys[0].hasPrefix("receipt:") && keys[1] == withId.id, "\(keys)")

        let first = try await CLIRunner.run(["run", "--as-of", Self.iso(Self.start), "--log-format", "json"], environment: env)
        #expect(first.status == 0, "\(first.stderr.suffix(600))")
        #expect(try await Self.requests(sim, "verifyReceipt") == 1, "only the receipt alone goes to verifyReceipt")
        #expect(try await Self.requests(sim, "subscriptions") == 1, "the id with a receipt goes to the Server API")
        let learned = try connection.query("""
            SELECT original_transaction_id, last_outcome, receipt_data IS NOT NULL FROM churnwatch.subscriptions WHERE customer_ref = 'alone'
            """)
        try #require(learned.count == 1)
        #expect(try learned[0].decode(String.self, at: 0) == alone.id, "the first poll learned the id and re-keyed the row")
        #expect(try learned[0].decode(String?.self, at: 1) == "ok" && learned[0].decode(Bool.self, at: 2))
        let segments = try connection.query("SELECT count(*) FROM churnwatch.subscription_segments WHERE original_transaction_id = \(alone.id)")
        #expect(try segments[0].decode(Int.self, at: 0) == 1)

        // The second poll of both: the Server API only.
        let ids = sim.directory.appendingPathComponent("ids.txt")
        try Data("\(alone.id)\n\(withId.id)\n".utf8).write(to: ids)
        let next = Self.start.addingTimeInterval(86_400)
        try await OwnThread.run { try sim.setClock(Self.iso(next)) }
        let second = try await CLIRunner.run(["backfill", "--ids", ids.path, "--as-of", Self.iso(next), "--log-format", "json"], environment: env)
        #expect(second.status == 0, "\(second.stderr.suffix(600))")
        #expect(second.stdout.contains("2 due, 2 polled"), "\(second.stdout)")
        #expect(try await Self.requests(sim, "verifyReceipt") == 1)
        #expect(try await Self.requests(sim, "subscriptions") == 3)
    }

    @Test("another app's receipt changes nothing and goes to quarantine")
    func anotherAppsReceiptIsQuarantined() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 200, seed: 31, start: Self.iso(Self.start))
        defer { sim.stop() }
        let row = try #require(try Self.receiptRows(sim).first)
        let header = "original_transaction_id,app_account_token,customer_ref,environment,receipt_data\n"
        // A deployment of another app whose rows hold a receipt of the simulator's app.
        let (db, env) = try await Self.scratch(sim, csv: header + ",,other-app,,\(row.receipt)\n", bundleId: "com.example.another.app")
        defer { db.drop() }
        let run = try await CLIRunner.run(["run", "--as-of", Self.iso(Self.start), "--log-format", "json"], environment: env)
        #expect(run.status == 0, "\(run.stderr.suffix(600))")
        let connection = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        let sub = try connection.query("SELECT original_transaction_id, last_outcome, last_error, state FROM churnwatch.subscriptions")
        try #require(sub.count == 1)
        #expect(try sub[0].decode(String.self, at: 0).hasPrefix("receipt:"), "the row keeps its placeholder")
        #expect(try sub[0].decode(String?.self, at: 1) == "failed" && sub[0].decode(String?.self, at: 3) == nil)
        let lastError = try sub[0].decode(String?.self, at: 2) ?? ""
        #expect(lastError.contains("another app"), "\(lastError)")
        let quarantined = try connection.query("SELECT endpoint, reason FROM churnwatch.quarantine")
        try #require(quarantined.count == 1)
        #expect(try quarantined[0].decode(String.self, at: 0) == "receipt")
        let segments = try connection.query("SELECT segment FROM churnwatch.subscription_segments").map { try $0.decode(String.self, at: 0) }
        #expect(segments.allSatisfy { $0 == "unknown" }, "nothing known of it: \(segments)")
    }
}
