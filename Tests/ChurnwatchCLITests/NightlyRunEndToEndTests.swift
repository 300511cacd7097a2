import Foundation
import Postgres
import Testing

/// churnwatch against the project's App Store simulator over loopback, night after night,
/// compared with the simulator's ground truth. Both run as the processes operators run.
@Suite("nightly runs against the simulator", .serialized)
struct NightlyRunEndToEndTests {
    static let day: TimeInterval = 86_400
    static let start = Date(timeIntervalSince1970: 1_790_820_000) // 2026-10-01T02:00:00Z

    static func iso(_ d: Date) -> String { d.ISO8601Format(.iso8601.year().month().day().time(includingFractionalSeconds: false).timeZone(separator: .omitted)) }

    static func parse(_ s: String) -> Date? {
        (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(s)) ?? (try? Date.ISO8601FormatStyle().parse(s))
    }

    /// A simulator and an empty, migrated database with the simulator's subscribers imported.
    struct World {
        let sim: SimulatorProcess
        let db: ScratchDatabase
        let env: [String: String]

        /// - Parameter populationLead: how long before the first night the simulated customers'
        ///   lives begin (the simulator schedules price increases from its day 35 and takes a
        ///   product off sale on day 21).
        static func make(subscribers: Int, seed: Int, simFlags: [String] = [], populationLead: TimeInterval = 0) async throws -> World {
            let sim = try await SimulatorProcess.start(subscribers: subscribers, seed: seed,
                                                 start: NightlyRunEndToEndTests.iso(start.addingTimeInterval(-populationLead)), extra: simFlags)
            let db: ScratchDatabase
            do { db = try ScratchDatabase.create() } catch { sim.stop(); throw error }
            var env = sim.environment
            env["DATABASE_URL"] = db.connectionURL
            let world = World(sim: sim, db: db, env: env)
            let migrate = try await CLIRunner.run(["migrate"], environment: env)
            guard migrate.status == 0 else { world.close(); throw CLITestError("migrate failed: \(migrate.stderr)") }
            let imported = try await CLIRunner.run(["import", sim.subscriptionsCSV.path], environment: env)
            guard imported.status == 0 else { world.close(); throw CLITestError("import failed: \(imported.stderr)") }
            return world
        }

        func close() {
            sim.stop()
            db.drop()
        }

        func connect() throws -> PostgresConnection {
            try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
        }

        /// `churnwatch run` for one simulated night (the simulator's clock set to it first).
        func night(_ asOf: Date, extra: [String] = []) async throws -> CLIRunner.Result {
            try sim.setClock(NightlyRunEndToEndTests.iso(asOf))
            return try await CLIRunner.run(["run", "--as-of", NightlyRunEndToEndTests.iso(asOf), "--log-format", "json"] + extra, environment: env)
        }
    }

    /// Events that undo each other between two polls leave nothing to observe.
    static let opposites: [String: String] = [
        "auto_renew_disabled": "auto_renew_enabled", "auto_renew_enabled": "auto_renew_disabled",
        "plan_change_scheduled": "plan_change_cancelled", "plan_change_cancelled": "plan_change_scheduled",
        "refunded": "refund_reversed", "refund_reversed": "refunded",
    ]

    /// The true events of one subscription between two polls that a poll can observe: pairs
    /// that cancel out are removed, and so is the start of a billing-retry spell that also
    /// ended before the poll (after a recovery Apple no longer says whether there was grace;
    /// the recovery itself is observable and must be found).
    static func observable(_ events: [SimulatorProcess.TruthEvent]) -> [String] {
        var net: [String] = []
        for e in events {
            if let opposite = opposites[e.event], let i = net.lastIndex(of: opposite) {
                net.remove(at: i)
            } else if e.event == "billing_recovered" {
                net.removeAll { ["billing_retry_started", "grace_period_started", "grace_period_expired"].contains($0) }
                net.append(e.event)
            } else {
                net.append(e.event)
            }
        }
        return net
    }

    @Test("14 nights, 2,000 subscribers: events are true (precision 100 %), observable changes are found (recall 100 %), segments match the truth, win-back entries follow the campaign table")
    func fourteenNights() async throws {
        let world = try await World.make(subscribers: 2000, seed: 11, populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        let allTruth = try world.sim.events(from: Self.iso(Self.start.addingTimeInterval(-800 * Self.day)), to: Self.iso(Self.start.addingTimeInterval(15 * Self.day)))
        var card = Scorecard(truth: allTruth)
        for night in 0..<14 {
            let asOf = Self.start.addingTimeInterval(Double(night) * Self.day)
            let r = try await world.night(asOf, extra: ["--status-rate", "5000", "--history-rate", "5000", "--concurrency", "32"])
            #expect(r.status == 0, "night \(night): \(r.stderr.suffix(500))")
            #expect(r.stdout.contains("done:"), "night \(night): \(r.stdout)")
            let runId = try db.query("SELECT max(id) FROM churnwatch.runs")[0].decode(Int64.self, at: 0)
            let polled = Set(try db.query("""
                SELECT original_transaction_id FROM churnwatch.run_items WHERE run_id = \(runId) AND status = 'done'
                """).map { try $0.decode(String.self, at: 0) })
            let failed = try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(runId) AND status <> 'done'")[0].decode(Int.self, at: 0)
            #expect(failed == 0, "night \(night): \(failed) items not done")
            var ours: [String: [String]] = [:]
            for row in try db.query("SELECT original_transaction_id, event FROM churnwatch.churn_events WHERE run_id = \(runId)") {
                ours[try row.decode(String.self, at: 0), default: []].append(try row.decode(String.self, at: 1))
            }
            card.scoreEvents(night: night, asOf: asOf, polled: polled, ours: ours)
            let segments = try db.query("""
                SELECT original_transaction_id, segment FROM churnwatch.subscription_segments
                WHERE original_transaction_id = ANY(\(Array(polled)))
                """).map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1)) }
            card.scoreSegments(night: night, segments, truth: try world.sim.truth(at: Self.iso(asOf)))
        }
        print("end-to-end: \(card.ours) events written, \(card.truePositive) true; \(card.observable) observable true changes, \(card.found) found; \(card.segmentsChecked) segments checked")
        #expect(card.baselineEvents.isEmpty, "baseline polls wrote events: \(card.baselineEvents.prefix(15))")
        #expect(card.falsePositives.isEmpty, "false positives: \(card.falsePositives.prefix(15))")
        #expect(card.missed.isEmpty, "missed: \(card.missed.prefix(15))")
        #expect(card.segmentMismatches.isEmpty, "segments: \(card.segmentMismatches.prefix(15))")
        #expect(card.found > 50, "too few observable changes to mean anything: \(card.found)")
        try Self.checkWinbackEntries(db)
    }

    /// Win-back entries: never two for one episode (the unique index), and every live entry's
    /// campaign is the one its subscription's current segment asks for.
    static func checkWinbackEntries(_ db: PostgresConnection) throws {
        let wrongCampaign = try db.query("""
            SELECT w.original_transaction_id, w.campaign, g.segment
            FROM churnwatch.winback_queue w JOIN churnwatch.subscription_segments g USING (original_transaction_id)
            WHERE w.status IN ('pending', 'claimed') AND NOT (
                (w.campaign = 'save_offer' AND g.segment IN ('will_not_renew', 'price_increase_pending')) OR
                (w.campaign = 'billing_fix' AND g.segment IN ('grace_period', 'billing_retry')) OR
                (w.campaign = 'winback_offer' AND g.segment IN ('churned_voluntary', 'churned_price_increase', 'churned_other')) OR
                (w.campaign = 'resubscribe_prompt' AND g.segment IN ('churned_billing', 'churned_product_unavailable')))
            """).map { "\(try $0.decode(String.self, at: 0)) \(try $0.decode(String.self, at: 1)) in \(try $0.decode(String.self, at: 2))" }
        #expect(wrongCampaign.isEmpty, "live entries whose segment asks for another campaign: \(wrongCampaign.prefix(10))")
        let liveByCampaign = try db.query("SELECT campaign, count(*) FROM churnwatch.winback_queue WHERE status = 'pending' GROUP BY 1")
        #expect(liveByCampaign.count >= 3, "expected live entries in most campaigns")
        #expect(try db.query("SELECT count(*) FROM churnwatch.segment_daily")[0].decode(Int.self, at: 0) > 0)
    }
}

/// What the nightly end-to-end test found against the simulator's truth, night by night: every
/// event churnwatch wrote must be a true change since the subscription's previous poll, and every
/// observable true change must be written.
struct Scorecard {
    var ours = 0, truePositive = 0, observable = 0, found = 0, segmentsChecked = 0
    var falsePositives: [String] = [], missed: [String] = [], segmentMismatches: [String] = [], baselineEvents: [String] = []
    private var lastPolled: [String: Date] = [:]
    private let truthByOtid: [String: [(Date, SimulatorProcess.TruthEvent)]]

    init(truth: [SimulatorProcess.TruthEvent]) {
        var byOtid: [String: [(Date, SimulatorProcess.TruthEvent)]] = [:]
        for e in truth {
            guard let t = NightlyRunEndToEndTests.parse(e.occurred_at) else { continue }
            byOtid[e.original_transaction_id, default: []].append((t, e))
        }
        truthByOtid = byOtid
    }

    mutating func scoreEvents(night: Int, asOf: Date, polled: Set<String>, ours: [String: [String]]) {
        for otid in polled {
            let mine = ours[otid] ?? []
            guard let since = lastPolled[otid] else {
                // The first poll is a baseline: no events.
                if !mine.isEmpty { baselineEvents.append("night \(night) \(otid) \(mine)") }
                continue
            }
            let between = (truthByOtid[otid] ?? []).filter { $0.0 > since && $0.0 <= asOf }.map(\.1)
            let trueKinds = Set(between.map(\.event))
            let expected = NightlyRunEndToEndTests.observable(between)
            self.ours += mine.count
            for e in mine {
                if trueKinds.contains(e) { truePositive += 1 } else { falsePositives.append("night \(night) \(otid) \(e) (truth: \(between.map(\.event)))") }
            }
            observable += expected.count
            for e in expected {
                if mine.contains(e) { found += 1 } else { missed.append("night \(night) \(otid) \(e) (ours: \(mine), truth: \(between.map(\.event)))") }
            }
        }
        for otid in polled { lastPolled[otid] = asOf }
    }

    mutating func scoreSegments(night: Int, _ segments: [(otid: String, segment: String)], truth: [String: SimulatorProcess.TruthSubscription]) {
        for (otid, segment) in segments {
            segmentsChecked += 1
            if let t = truth[otid], t.segment != segment {
                segmentMismatches.append("night \(night) \(otid): ours \(segment), truth \(t.segment)")
            }
        }
    }
}
