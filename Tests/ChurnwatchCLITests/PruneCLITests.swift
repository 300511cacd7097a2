import Foundation
import Postgres
import Testing

/// `churnwatch prune` and the prune at the end of a nightly run, as operators run them.
@Suite("churnwatch prune (the binary, against the simulator)")
struct PruneCLITests {
    static let day: TimeInterval = 86_400

    static func transactions(_ db: PostgresConnection) throws -> Int {
        try db.query("SELECT count(*) FROM churnwatch.transactions")[0].decode(Int.self, at: 0)
    }

    /// The number `line` gives for `table` ("... transactions 123; ...").
    static func rows(_ table: String, in line: String) -> Int? {
        guard let r = line.range(of: "\(table) ") else { return nil }
        return Int(line[r.upperBound...].prefix { $0.isNumber })
    }

    @Test("CHURNWATCH_PRUNE=off: the run prunes nothing; prune --dry-run counts and changes nothing; prune removes what it counted; the next run prunes at its end")
    func pruneAfterTheRunAndByHand() async throws {
        // Lives begun four months before the first night: the first night reads histories whose
        // older periods ended more than 60 days ago (transactions' default retention).
        let world = try await NightlyRunEndToEndTests.World.make(subscribers: 150, seed: 9, populationLead: 120 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        let night0 = NightlyRunEndToEndTests.start
        let at = NightlyRunEndToEndTests.iso(night0)
        var off = world.env
        off["CHURNWATCH_PRUNE"] = "off"
        let first = try await Harness.night(night0, sim: world.sim, env: off)
        #expect(first.status == 0, "\(first.stderr.suffix(300))")
        #expect(!first.stdout.contains("prune:"), "\(first.stdout)")

        let before = try Self.transactions(db)
        let dry = try await CLIRunner.run(["prune", "--dry-run", "--as-of", at], environment: world.env)
        #expect(dry.status == 0, "\(dry.stderr)")
        let counted = try #require(Self.rows("transactions", in: dry.stdout), "\(dry.stdout)")
        #expect(counted > 0, "the histories hold periods that ended long ago: \(dry.stdout)")
        #expect(try Self.transactions(db) == before, "a dry run changes nothing")

        let pruned = try await CLIRunner.run(["prune", "--as-of", at], environment: world.env)
        #expect(pruned.status == 0 && pruned.stdout.hasPrefix("prune: removed"), "\(pruned.stdout) \(pruned.stderr)")
        #expect(Self.rows("transactions", in: pruned.stdout) == counted)
        #expect(try Self.transactions(db) == before - counted)
        let newest = try db.query("""
            SELECT count(*) FROM churnwatch.subscriptions s
            WHERE s.latest_transaction_id IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM churnwatch.transactions t WHERE t.transaction_id = s.latest_transaction_id)
            """)[0].decode(Int.self, at: 0)
        #expect(newest == 0, "every subscription keeps its newest transaction")

        let second = try await Harness.night(night0.addingTimeInterval(Self.day), sim: world.sim, env: world.env)
        #expect(second.status == 0, "\(second.stderr.suffix(300))")
        #expect(second.stdout.split(separator: "\n").contains { $0.hasPrefix("prune: removed run_items ") }, "\(second.stdout)")
    }
}
