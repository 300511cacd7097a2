import Foundation
import Postgres
import Testing

/// Decision Y of issue 48: the cancel-page view is kept beside the segment
/// (`subscription_segments.last_cancel_page_view_at`), and a rule may answer a second visit
/// differently (`--viewed-before`).
@Suite("churnwatch serve: a second visit to the cancel page", .serialized)
struct ServeRepeatVisitCLITests {
    typealias E2E = NightlyRunEndToEndTests
    typealias Retention = ServeRetentionCLITests

    @Test("a first visit is answered by the rule for everyone, the same subscriber's next visit by the rule for a repeated one; segments --cancel-page counts the view; a bad --viewed-before is one line and 78")
    func secondVisitAnsweredOtherwise() async throws {
        let world = try await E2E.World.make(subscribers: 40, seed: 6)
        defer { world.close() }
        #expect(try await world.night(E2E.start, extra: ["--notifications", "off"]).status == 0)
        try await Retention.upload(Retention.m1, world.env)
        try await Retention.upload(Retention.m3, world.env)
        let rules: [[String]] = [
            ["--name", "everyone", "--kind", "message", "--message", Retention.m3],
            ["--name", "again", "--priority", "1", "--viewed-before", "within:7", "--kind", "message", "--message", Retention.m1],
        ]
        for rule in rules {
            let r = try await CLIRunner.run(["messages", "rules", "set"] + rule, environment: world.env)
            #expect(r.status == 0, "\(r.stderr)")
        }
        let bad = try await CLIRunner.run(["messages", "rules", "set", "--name", "x", "--viewed-before", "within:0", "--kind", "message",
                                           "--message", Retention.m3], environment: world.env)
        #expect(bad.status == 78 && bad.stderr.split(separator: "\n").count == 1 && bad.stderr.contains("--viewed-before"), "\(bad)")

        let db = try world.connect()
        let row = try db.query("""
            SELECT s.original_transaction_id, s.product_id, g.segment FROM churnwatch.subscriptions s
            JOIN churnwatch.subscription_segments g USING (original_transaction_id) WHERE s.product_id IS NOT NULL LIMIT 1
            """)[0]
        let s = Retention.Subscriber(otid: try row.decode(String.self, at: 0), product: try row.decode(String.self, at: 1),
                                     segment: nil, tenureDays: nil, draw: 0)
        let segment = try row.decode(String.self, at: 2)
        let server = try await ServeCLITests.Server.start(world.env)
        defer { server.kill() }
        let first = try Retention.post(server, try Retention.signed(world.sim, s, at: Date()))
        #expect(first.status == 200 && first.body.contains(Retention.m3), "a first visit: \(first)")
        #expect(try await Retention.recorded(db, 1), "the first visit was not recorded")
        let second = try Retention.post(server, try Retention.signed(world.sim, s, at: Date()))
        #expect(second.status == 200 && second.body.contains(Retention.m1), "a second visit: \(second)")
        #expect(try await Retention.recorded(db, 2), "the second visit was not recorded")
        #expect(try await server.stop().status == 0)

        let counted = try await CLIRunner.run(["segments", "--cancel-page", "--csv"], environment: world.env)
        #expect(counted.status == 0, "\(counted.stderr)")
        let viewed = counted.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        #expect(viewed.first { $0.first.map(String.init) == segment }?[2] == "1", "\(counted.stdout)")
        #expect(viewed.reduce(0) { $0 + (Int($1[2]) ?? 0) } == 1, "\(counted.stdout)")
    }
}
