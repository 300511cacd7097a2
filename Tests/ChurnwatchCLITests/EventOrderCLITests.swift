import Foundation
import Postgres
import Testing

/// The event log is a function of what Apple said, not of the order it arrived in (issue 47),
/// through the real path: the simulator's signed notifications ingested into PostgreSQL in
/// signedDate order, in random orders, newest first, and split into several ingests, each on a
/// fresh database, give the same live events, each logged once.
@Suite("the event log does not depend on the order notifications arrive in", .serialized)
struct EventOrderCLITests {
    typealias E2E = NightlyRunEndToEndTests
    static let day = E2E.day

    /// The live event log of `db`, one line per event, and how many events were superseded.
    static func log(_ db: PostgresConnection) throws -> (live: [String], superseded: Int) {
        let live = try db.query("""
            SELECT original_transaction_id || ' ' || event || ' ' || (extract(epoch FROM occurred_at) * 1000)::bigint
            FROM churnwatch.churn_events WHERE superseded_at IS NULL ORDER BY 1
            """).map { try $0.decode(String.self, at: 0) }
        let superseded = try db.query("SELECT count(*) FROM churnwatch.churn_events WHERE superseded_at IS NOT NULL")[0].decode(Int.self, at: 0)
        return (live, superseded)
    }

    /// What a database is given, in order: a file of notifications, or a poll of every
    /// subscription (`backfill --all` at the simulator's clock: the same answers whenever it comes).
    enum Step {
        case ingest([String])
        case pollAll
    }

    /// A fresh database with the notifications ingested in `files` (one `ingest` each, in order).
    static func ingested(_ world: E2E.World, _ files: [[String]]) async throws -> (live: [String], superseded: Int, stale: Int) {
        try await given(world, files.map { .ingest($0) })
    }

    /// A fresh database given `steps`, in order.
    static func given(_ world: E2E.World, _ steps: [Step]) async throws -> (live: [String], superseded: Int, stale: Int) {
        let scratch = try ScratchDatabase.create()
        defer { scratch.drop() }
        var env = world.env
        env["DATABASE_URL"] = scratch.connectionURL
        env["CHURNWATCH_PRUNE"] = "off"
        let migrated = try await CLIRunner.run(["migrate"], environment: env)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        for step in steps {
            guard case .ingest(let lines) = step else {
                let r = try await CLIRunner.run(["backfill", "--all", "--status-rate", "5000", "--history-rate", "5000"], environment: env)
                #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(400))")
                continue
            }
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("cw-order-\(UUID().uuidString.prefix(8)).jsonl")
            defer { try? FileManager.default.removeItem(at: file) }
            try lines.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
            let r = try await CLIRunner.run(["notifications", "ingest", file.path], environment: env)
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(400))")
        }
        let db = try PostgresConnection(connectionString: scratch.connectionURL, logger: .postgres)
        let (live, superseded) = try Self.log(db)
        let stale = try db.query("SELECT count(*) FROM churnwatch.notifications WHERE outcome = 'stale'")[0].decode(Int.self, at: 0)
        return (live, superseded, stale)
    }

    @Test("two months of 800 subscribers' notifications: in order, in two random orders, newest first and in four shuffled ingests, the same live events; out of order, events are superseded, never deleted")
    func sameLogInAnyOrder() async throws {
        let world = try await E2E.World.make(subscribers: 800, seed: 29, populationLead: 45 * Self.day)
        defer { world.close() }
        let end = E2E.start.addingTimeInterval(20 * Self.day)
        try world.sim.setClock(E2E.iso(end))
        let inOrder = try await NotificationFeedCLITests.payloads(world, from: E2E.start.addingTimeInterval(-40 * Self.day), to: end)
        #expect(inOrder.count > 800, "only \(inOrder.count) notifications")
        var rng = SplitMixCLI(47)
        let shuffled = inOrder.shuffled(using: &rng)
        let expected = try await Self.ingested(world, [inOrder])
        #expect(expected.live.count > 300 && expected.superseded == 0 && expected.stale == 0,
                "in order: \(expected.live.count) events, \(expected.superseded) superseded, \(expected.stale) stale")
        let orders: [(String, [[String]])] = [
            ("shuffled", [shuffled]),
            ("shuffled again", [inOrder.shuffled(using: &rng)]),
            ("newest first", [inOrder.reversed()]),
            ("four shuffled ingests", stride(from: 0, to: shuffled.count, by: shuffled.count / 4 + 1).map {
                Array(shuffled[$0..<min($0 + shuffled.count / 4 + 1, shuffled.count)])
            }),
        ]
        var supersededSeen = 0
        for (name, files) in orders {
            let got = try await Self.ingested(world, files)
            let (missing, extra) = (Set(expected.live).subtracting(got.live), Set(got.live).subtracting(expected.live))
            #expect(missing.isEmpty && extra.isEmpty && got.live.count == expected.live.count,
                    "\(name): \(missing.count) missing \(missing.sorted().prefix(4)), \(extra.count) extra \(extra.sorted().prefix(4))")
            #expect(got.stale == 0, "\(name): \(got.stale) notifications could not be placed")
            supersededSeen += got.superseded
            print("event order, \(name): \(got.live.count) live events (in order: \(expected.live.count)), \(got.superseded) superseded")
        }
        #expect(supersededSeen > 0, "out of order, some events were first derived from the wrong neighbours")

        // A poll of everyone among them: after every notification, or between two shuffled
        // halves (the second half then arrives older than the polled state).
        let polledLast = try await Self.given(world, [.ingest(inOrder), .pollAll])
        let half = shuffled.count / 2
        let polledBetween = try await Self.given(world, [.ingest(Array(shuffled[..<half])), .pollAll, .ingest(Array(shuffled[half...]))])
        #expect(Set(polledLast.live) == Set(polledBetween.live) && polledBetween.stale == 0,
                "a poll between: \(Set(polledLast.live).subtracting(polledBetween.live).sorted().prefix(4)) missing, \(Set(polledBetween.live).subtracting(polledLast.live).sorted().prefix(4)) extra")
        print("event order, a poll between two shuffled halves: \(polledBetween.live.count) live events (polled last: \(polledLast.live.count)), \(polledBetween.superseded) superseded")
    }
}

/// A seeded generator for reproducible orders (Harness's SplitMix64).
struct SplitMixCLI: RandomNumberGenerator {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 { Harness.next(&state) }
}
