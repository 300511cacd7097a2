import Foundation
import Postgres
import Testing

/// The retention loop as an operator runs it, against the simulator: configure an offer with a
/// holdout, run nights, drain save_offer with `winback claim` (signed offers), sign for SQL
/// consumers, read `outcomes` and revenue at risk.
@Suite("churnwatch offers, winback claim with signed offers, outcomes (the binary, against the simulator)")
struct RetentionLoopCLITests {
    static let start = Date(timeIntervalSince1970: 1_790_820_000) // 2026-10-01T02:00:00Z
    static let day: TimeInterval = 86_400

    static func json(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    static func count(_ db: PostgresConnection, _ sql: PostgresQuery) throws -> Int {
        try db.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("offers with a holdout: claim signs treated entries, held-out ones are never claimed, outcomes and revenue at risk are reported")
    func retentionLoop() async throws {
        let world = try await NightlyRunEndToEndTests.World.make(subscribers: 2000, seed: 15)
        defer { world.close() }
        let env = world.env
        let db = try world.connect()

        let bad = try await CLIRunner.run(["offers", "set", "--campaign", "save_offer", "--offer-id", "save50", "--holdout", "1"], environment: env)
        #expect(bad.status == 78 && bad.stderr.contains("--holdout"), "\(bad.stderr)")
        let set = try await CLIRunner.run(["offers", "set", "--campaign", "save_offer", "--offer-id", "save50", "--holdout", "0.3"], environment: env)
        #expect(set.status == 0, "\(set.stderr)")
        let list = try await CLIRunner.run(["offers", "list", "--json"], environment: env)
        let offers = try Self.json(list.stdout)
        #expect(offers.count == 1 && offers.first?["offer_id"] as? String == "save50" && offers.first?["holdout"] as? Double == 0.3)
        #expect(offers.first?["product_id"] is NSNull)

        for n in 0..<3 {
            let r = try await world.night(Self.start.addingTimeInterval(Double(n) * Self.day))
            try #require(r.status == 0, "night \(n): \(r.stderr)")
        }
        let total = try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer'")
        let held = try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer' AND status = 'held_out'")
        try #require(total >= 40, "too few save_offer entries to test with: \(total)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer' AND offer_id = 'save50'") == total)
        #expect(held > 0 && held < total, "held out \(held) of \(total)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE holdout <> (status = 'held_out')") == 0)

        let (lines, at) = try await Self.claimSigned(env: env, db: db, held: held)
        try await Self.reclaimADayLater(lines, at: at, env: env, db: db)
        try await Self.signForSQLConsumers(env: env, db: db)
        try await Self.outcomesAndRevenue(world: world, db: db)
    }

    /// Claims save_offer at night 3 + 1 h: refused without the key; then every line carries a signed offer.
    static func claimSigned(env: [String: String], db: PostgresConnection, held: Int) async throws -> ([[String: Any]], Date) {
        // Without the key, nothing is claimed: exit 78 naming the setting.
        var keyless = env
        keyless["APPSTORE_PRIVATE_KEY_PATH"] = nil
        let at = Self.start.addingTimeInterval(2 * Self.day + 3600)
        let atText = NightlyRunEndToEndTests.iso(at)
        let refused = try await CLIRunner.run(["winback", "claim", "--campaign", "save_offer", "--consumer", "m", "--as-of", atText], environment: keyless)
        #expect(refused.status == 78 && refused.stderr.contains("APPSTORE_PRIVATE_KEY_PATH"), "\(refused.stderr)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE status = 'claimed'") == 0)

        let signedFrom = Int64(Date().timeIntervalSince1970 * 1000)
        let claim = try await CLIRunner.run(["winback", "claim", "--campaign", "save_offer", "--consumer", "m", "--limit", "10000",
                                             "--as-of", atText], environment: env)
        let signedUntil = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(claim.status == 0, "\(claim.stderr)")
        let lines = try Self.json(claim.stdout)
        #expect(!lines.isEmpty && lines.allSatisfy { $0["holdout"] as? Bool == false && $0["status"] as? String == "claimed" })
        let due = try Self.count(db, """
            SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer' AND status <> 'held_out'
              AND not_before <= \(at) AND (expires_at IS NULL OR expires_at > \(at))
            """)
        let claimedNow = try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE status = 'claimed'")
        #expect(lines.count <= due && lines.count == claimedNow)
        var nonces: Set<String> = []
        for line in lines {
            let offer = try #require(line["offer"] as? [String: Any], "every claimed save_offer entry has an offer")
            #expect(offer["offer_id"] as? String == "save50")
            #expect(offer["product_id"] as? String == line["product_id"] as? String)
            #expect(offer["key_id"] as? String == env["APPSTORE_KEY_ID"])
            // Signed at the real time, not at --as-of: Apple takes a signature for 24 hours after it.
            #expect(((offer["timestamp"] as? NSNumber)?.int64Value).map { (signedFrom...signedUntil).contains($0) } == true)
            let nonce = try #require(offer["nonce"] as? String)
            #expect(nonce == nonce.lowercased() && UUID(uuidString: nonce) != nil)
            nonces.insert(nonce)
            #expect(Data(base64Encoded: offer["signature"] as? String ?? "").map { $0.first == 0x30 } == true, "base64 DER")
            #expect((offer["jws"] as? String)?.split(separator: ".").count == 3)
        }
        #expect(nonces.count == lines.count, "a fresh nonce per entry")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE status = 'held_out'") == held, "claim leaves held-out entries alone")

        return (lines, at)
    }

    static func reclaimADayLater(_ lines: [[String: Any]], at: Date, env: [String: String], db: PostgresConnection) async throws {
        // Released and claimed again (a day later on the run's clock): a fresh signature with a fresh nonce.
        let firstId = try #require((lines.first?["id"] as? NSNumber)?.int64Value)
        let firstNonce = (lines.first?["offer"] as? [String: Any])?["nonce"] as? String
        #expect(try await CLIRunner.run(["winback", "release", String(firstId)], environment: env).status == 0)
        let later = at.addingTimeInterval(25 * 3600)
        let reclaim = try await CLIRunner.run(["winback", "claim", "--campaign", "save_offer", "--consumer", "m", "--limit", "10000",
                                               "--as-of", NightlyRunEndToEndTests.iso(later)], environment: env)
        let again = try Self.json(reclaim.stdout).first { ($0["id"] as? NSNumber)?.int64Value == firstId }
        if let again {
            let offer = try #require(again["offer"] as? [String: Any])
            let firstTimestamp = ((lines.first?["offer"] as? [String: Any])?["timestamp"] as? NSNumber)?.int64Value ?? .max
            #expect(((offer["timestamp"] as? NSNumber)?.int64Value).map { $0 >= firstTimestamp } == true)
            #expect(offer["nonce"] as? String != firstNonce)
        } else {
            // Its period may have ended in those 25 hours: then it expired instead.
            #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE id = \(firstId) AND status = 'expired'") == 1)
        }

    }

    static func signForSQLConsumers(env: [String: String], db: PostgresConnection) async throws {
        // SQL consumers sign with `offers sign`; held-out and unknown ids are refused on one line.
        let heldId = try db.query("SELECT id FROM churnwatch.winback_queue WHERE status = 'held_out' ORDER BY id LIMIT 1")[0].decode(Int64.self, at: 0)
        let claimedId = try db.query("SELECT id FROM churnwatch.winback_queue WHERE status = 'claimed' ORDER BY id LIMIT 1")[0].decode(Int64.self, at: 0)
        let sign = try await CLIRunner.run(["offers", "sign", String(claimedId), String(heldId), "999999"], environment: env)
        #expect(sign.status == 65)
        #expect(sign.stderr.split(separator: "\n").count == 1 && sign.stderr.contains("\(heldId) (held_out)") && sign.stderr.contains("999999 (unknown)"))
        let signed = try Self.json(sign.stdout)
        #expect(signed.count == 1 && (signed.first?["id"] as? NSNumber)?.int64Value == claimedId)
        #expect((signed.first?["offer"] as? [String: Any])?["offer_id"] as? String == "save50")

    }

    static func outcomesAndRevenue(world: NightlyRunEndToEndTests.World, db: PostgresConnection) async throws {
        let env = world.env
        // Later nights decide outcomes; `outcomes --json` reports treated against held out.
        for n in stride(from: 6, to: 40, by: 6) {
            let r = try await world.night(Self.start.addingTimeInterval(Double(n) * Self.day))
            try #require(r.status == 0, "night \(n): \(r.stderr)")
        }
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE outcome IS NOT NULL AND holdout") > 0)
        let outcomes = try await CLIRunner.run(["outcomes", "--json", "--as-of", NightlyRunEndToEndTests.iso(Self.start.addingTimeInterval(40 * Self.day))],
                                               environment: env)
        #expect(outcomes.status == 0, "\(outcomes.stderr)")
        let rows = try Self.json(outcomes.stdout)
        let save = try #require(rows.first { $0["campaign"] as? String == "save_offer" && $0["offer_id"] as? String == "save50" })
        for field in ["campaign", "offer_id", "entries", "delivered", "saved", "saved_share", "holdout_entries", "holdout_saved_share",
                      "uplift", "uplift_low", "uplift_high", "median_days_to_save"] {
            #expect(save.keys.contains(field), "outcomes --json lacks \(field)")
        }
        let totalNow = try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer' AND offer_id = 'save50'")
        let heldNow = try Self.count(db, "SELECT count(*) FROM churnwatch.winback_queue WHERE campaign = 'save_offer' AND holdout")
        #expect((save["entries"] as? Int ?? 0) + (save["holdout_entries"] as? Int ?? 0) == totalNow)
        #expect(save["holdout_entries"] as? Int == heldNow)
        #expect(save["delivered"] as? Int == 0, "nothing was acked")
        if let low = save["uplift_low"] as? Double, let high = save["uplift_high"] as? Double, let u = save["uplift"] as? Double {
            #expect(low <= u && u <= high)
        }
        let table = try await CLIRunner.run(["outcomes", "--by", "campaign"], environment: env)
        #expect(table.status == 0 && table.stdout.contains("save_offer"))
        let badBy = try await CLIRunner.run(["outcomes", "--by", "weekday"], environment: env)
        #expect(badBy.status == 78 && badBy.stderr.split(separator: "\n").count == 1)

        let revenue = try await CLIRunner.run(["segments", "--revenue", "--csv"], environment: env)
        #expect(revenue.status == 0, "\(revenue.stderr)")
        let revenueLines = revenue.stdout.split(separator: "\n")
        #expect(revenueLines.first == "segment,currency,subscriptions,revenue_at_risk,bundle_id")
        #expect(revenueLines.contains { $0.hasPrefix("will_not_renew,USD,") }, "\(revenue.stdout)")
        #expect(try Self.count(db, "SELECT count(*) FROM churnwatch.subscription_segments WHERE renewal_price IS NOT NULL") > 0)
    }
}
