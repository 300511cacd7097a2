import Foundation
import Postgres
import Testing

/// The retention loop closed against a simulator whose customers are more likely to stay when
/// they get an offer (`--offer-effect`): a holdout of half the save_offer entries, every claimed
/// offer "delivered" (redeemed at the simulator), and `outcomes` must find a positive uplift whose
/// 95 % interval covers the simulator's true effect on the same entries.
@Suite("churnwatch outcomes measures the simulator's true offer effect", .serialized)
struct OfferEffectCLITests {
    static let start = RetentionLoopCLITests.start
    static let day = RetentionLoopCLITests.day
    static let effect = 0.6

    struct Redemption: Decodable {
        var original_transaction_id: String
        var eligible: Bool
        var saved: Bool
        var would_have_stayed: Bool
        var changed_outcome: Bool
    }

    @Test("holdout 0.5, offers redeemed at the simulator: uplift positive, its interval covers the true effect")
    func measuredUpliftCoversTrueEffect() async throws {
        let world = try await NightlyRunEndToEndTests.World.make(
            subscribers: 1500, seed: 23, simFlags: ["--offer-effect", String(Self.effect)])
        defer { world.close() }
        let env = world.env
        let db = try world.connect()
        let set = try await CLIRunner.run(["offers", "set", "--campaign", "save_offer", "--offer-id", "save50", "--holdout", "0.5"],
                                          environment: env)
        try #require(set.status == 0, "\(set.stderr)")

        // Treatment: each night, drain save_offer and deliver every signed offer (the app redeems it).
        var delivered: Set<String> = []
        for n in 0..<4 {
            let night = Self.start.addingTimeInterval(Double(n) * Self.day)
            let r = try await world.night(night)
            try #require(r.status == 0, "night \(n): \(r.stderr)")
            let at = NightlyRunEndToEndTests.iso(night.addingTimeInterval(3600))
            let claim = try await CLIRunner.run(["winback", "claim", "--campaign", "save_offer", "--consumer", "m", "--limit", "10000",
                                                 "--as-of", at], environment: env)
            try #require(claim.status == 0, "\(claim.stderr)")
            for line in try RetentionLoopCLITests.json(claim.stdout) {
                #expect(line["offer"] is [String: Any], "a claimed save_offer entry carries its signed offer")
                let id = try #require(line["original_transaction_id"] as? String)
                let body = try JSONSerialization.data(withJSONObject: ["original_transaction_id": id, "at": at])
                let redeemed = try JSONDecoder().decode(Redemption.self, from: try world.sim.request("POST", "/_sim/offers/redeem", body: body))
                #expect(redeemed.original_transaction_id == id)
                delivered.insert(id)
            }
        }
        // New entries from here on get no offer, so the save50 line holds exactly the treated nights.
        try #require(try await CLIRunner.run(["offers", "remove", "--campaign", "save_offer"], environment: env).status == 0)
        let redemptions = try JSONDecoder().decode([String: [Redemption]].self, from: try world.sim.request("GET", "/_sim/offers"))["redemptions"] ?? []
        #expect(Set(redemptions.map(\.original_transaction_id)) == delivered)
        let saved = redemptions.filter(\.saved)
        try #require(saved.count >= 10, "too few customers saved by the offer to test with: \(saved.count)")

        // Let every entry's period end (yearly plans included), then read the result. Sparse nights
        // are enough: a poll sees what changed since the last one, with Apple's dates.
        for d in [7, 35, 120, 250, 390] {
            let r = try await world.night(Self.start.addingTimeInterval(Double(d) * Self.day))
            try #require(r.status == 0, "night day \(d): \(r.stderr)")
        }
        let savedIds = saved.map(\.original_transaction_id)
        #expect(try RetentionLoopCLITests.count(db, """
            SELECT count(*) FROM churnwatch.winback_queue WHERE offer_id = 'save50' AND NOT holdout
              AND original_transaction_id = ANY(\(savedIds)::text[]) AND outcome IS DISTINCT FROM 'saved'
            """) == 0, "every customer the offer saved is measured as saved")

        try Self.labelsAndHorizonsMatchTheTruth(db, world.sim)

        let asOf = NightlyRunEndToEndTests.iso(Self.start.addingTimeInterval(391 * Self.day))
        let outcomes = try await CLIRunner.run(["outcomes", "--json", "--as-of", asOf], environment: env)
        try #require(outcomes.status == 0, "\(outcomes.stderr)")
        let row = try #require(try RetentionLoopCLITests.json(outcomes.stdout).first { $0["offer_id"] as? String == "save50" })
        let entries = try #require(row["entries"] as? Int), decided = try #require(row["decided"] as? Int)
        let heldDecided = try #require(row["holdout_decided"] as? Int)
        #expect(decided == entries, "every treated entry is decided once its period has ended")
        #expect(decided >= 20 && heldDecided >= 20, "treated \(decided), held out \(heldDecided)")
        // The true effect, intention-to-treat: treated entries whose outcome the offer changed.
        let trueEffect = Double(redemptions.filter(\.changed_outcome).count) / Double(entries)
        let uplift = try #require(row["uplift"] as? Double)
        let low = try #require(row["uplift_low"] as? Double), high = try #require(row["uplift_high"] as? Double)
        print("offer effect: true \(trueEffect), measured \(uplift) [\(low), \(high)], treated \(decided), held out \(heldDecided)")
        #expect(trueEffect > 0.1, "the knob works: \(trueEffect)")
        #expect(low > 0, "the uplift is positive beyond doubt: [\(low), \(high)]")
        #expect(low <= trueEffect && trueEffect <= high, "the interval [\(low), \(high)] covers the true effect \(trueEffect)")
    }

    /// Every entry of the offer against the simulator's truth (docs/churn-model.md, "Outcomes"):
    /// on the night it was opened the customer was at risk and the period ended at its horizon;
    /// its label is saved exactly when, a minute after that horizon, the subscription is active,
    /// in billing retry or in grace (it renewed, or was still set to renew).
    static func labelsAndHorizonsMatchTheTruth(_ db: PostgresConnection, _ sim: SimulatorProcess) throws {
        let rows = try db.query("""
            SELECT original_transaction_id, opened_at, expires_at, outcome FROM churnwatch.winback_queue
            WHERE offer_id = 'save50' ORDER BY id
            """).map { (try $0.decode(String.self, at: 0), try $0.decode(Date.self, at: 1), try $0.decode(Date.self, at: 2),
                        try $0.decode(String?.self, at: 3)) }
        try #require(rows.count >= 40, "too few entries to judge: \(rows.count)")
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        func states(_ asks: [(String, Date)]) throws -> [[String: Any]] {
            let body = try JSONSerialization.data(withJSONObject: asks.map { ["original_transaction_id": $0.0, "at": format.string(from: $0.1)] })
            let json = try JSONSerialization.jsonObject(with: try sim.request("POST", "/_sim/truth/at", body: body)) as? [String: Any]
            return json?["states"] as? [[String: Any]] ?? []
        }
        let opened = try states(rows.map { ($0.0, $0.1) })
        let atHorizon = try states(rows.map { ($0.0, $0.2.addingTimeInterval(60)) })
        try #require(opened.count == rows.count && atHorizon.count == rows.count)
        var wrong: [String] = []
        for (i, row) in rows.enumerated() {
            let segment = opened[i]["segment"] as? String ?? "-"
            let trueEnd = (opened[i]["expires_at"] as? String).flatMap(format.date(from:))
            let trueLabel = [1, 3, 4].contains(atHorizon[i]["status"] as? Int ?? 0) ? "saved" : "lost"
            if !["will_not_renew", "price_increase_pending"].contains(segment) { wrong.append("\(row.0): not at risk (\(segment))") }
            if trueEnd.map({ abs($0.timeIntervalSince(row.2)) < 0.001 }) != true { wrong.append("\(row.0): horizon \(row.2), true \(String(describing: trueEnd))") }
            if row.3 != trueLabel { wrong.append("\(row.0): \(row.3 ?? "open"), true \(trueLabel)") }
        }
        #expect(wrong.isEmpty, "\(wrong.count) of \(rows.count) entries disagree with the truth: \(wrong.prefix(5))")
    }
}
