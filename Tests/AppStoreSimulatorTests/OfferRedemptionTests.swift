@testable import AppStoreSimulator
import Foundation
import Testing

/// Redeemed save offers change a timeline from the redemption on, and everything derived from it agrees.
@Suite("redeemed offers (--offer-effect)")
struct OfferRedemptionTests {
    static let start = PopulationConfig.defaultStart

    /// Subscriptions with auto-renew off and the period running at `t`.
    static func willNotRenew(_ p: Population, at t: Int64) -> [Int] {
        (0..<p.count).filter { p.exists($0, at: t) && p.state($0, at: t).segment(at: t) == .willNotRenew }
    }

    @Test("a saved customer: auto-renew back on at the redemption, renewals after, truth records the offer")
    func savedTimeline() {
        let p = Population(config: PopulationConfig(subscribers: 2000, seed: 7, start: Self.start))
        let t = Self.start + 10 * SimTime.day
        let candidates = Self.willNotRenew(p, at: t)
        #expect(candidates.count > 20)
        var saved = 0
        for i in candidates {
            let before = p.state(i, at: t)
            let r = p.redeemOffer(i, at: t, effect: 1)
            #expect(r.eligible && r.saved)
            saved += 1
            let now = p.state(i, at: t)
            #expect(now.reportedAutoRenew && now.segment(at: t) != .willNotRenew)
            #expect(now.latest == before.latest, "the transaction in effect is unchanged")
            let after = p.state(i, at: before.latest.expiresDate)
            #expect(after.status == 1 && after.latest.offer == .promotional && after.latest.index == before.latest.index + 1)
            let truth = p.truthEvents(i).filter { $0.time == t }
            #expect(truth.contains { $0.kind == .autoRenewEnabled }, "ground truth records the redemption")
            #expect(p.timeline(i).map(\.time) == p.timeline(i).map(\.time).sorted())
            // Saved once: a second redemption leaves the timeline alone.
            let again = p.redeemOffer(i, at: t + SimTime.day, effect: 1)
            #expect(!again.eligible && !again.saved)
        }
        #expect(p.offerRedemptions.filter(\.saved).count == saved)
    }

    @Test("effect 0 and ineligible customers change nothing; the draw is per subscription and seed")
    func noEffect() {
        let p = Population(config: PopulationConfig(subscribers: 2000, seed: 7, start: Self.start))
        let q = Population(config: PopulationConfig(subscribers: 2000, seed: 7, start: Self.start))
        let t = Self.start + 10 * SimTime.day
        let candidates = Self.willNotRenew(p, at: t)
        for i in candidates.prefix(10) {
            let r = p.redeemOffer(i, at: t, effect: 0)
            #expect(r.eligible && !r.saved)
            #expect(Array(p.timeline(i)) == Array(q.timeline(i)))
        }
        let active = (0..<p.count).first { p.exists($0, at: t) && p.state($0, at: t).segment(at: t) == .active }!
        #expect(!p.redeemOffer(active, at: t, effect: 1).eligible)
        #expect(Array(p.timeline(active)) == Array(q.timeline(active)))
        let half = candidates.map { p.redeemOffer($0, at: t, effect: 0.5).saved }
        let halfAgain = candidates.map { q.redeemOffer($0, at: t, effect: 0.5).saved }
        #expect(half == halfAgain)
        let share = Double(half.filter { $0 }.count) / Double(candidates.count)
        #expect(share > 0.25 && share < 0.75, "share saved \(share)")
    }

    @Test("per offer id (--offer-effect-by): the offer's own probability, one draw for every offer, saved_if per offer")
    func perOffer() {
        let byOffer = ["OFFER_A": 0.2, "OFFER_B": 0.35]
        let p = Population(config: PopulationConfig(subscribers: 3000, seed: 7, start: Self.start))
        let q = Population(config: PopulationConfig(subscribers: 3000, seed: 7, start: Self.start))
        let t = Self.start + 10 * SimTime.day
        let candidates = Self.willNotRenew(p, at: t)
        #expect(candidates.count > 60)
        var savedA = 0, savedB = 0
        for i in candidates {
            let a = p.redeemOffer(i, at: t, effect: 0.05, offerId: "OFFER_A", effectByOffer: byOffer)
            let b = q.redeemOffer(i, at: t, effect: 0.05, offerId: "OFFER_B", effectByOffer: byOffer)
            #expect(a.offerId == "OFFER_A" && b.offerId == "OFFER_B")
            #expect(a.savedIf == b.savedIf && Set(a.savedIf.keys) == Set(byOffer.keys), "the same draw")
            #expect(a.saved == a.savedIf["OFFER_A"] && b.saved == b.savedIf["OFFER_B"])
            #expect(!a.saved || b.saved, "a less likely offer never saves where a likelier one does not")
            savedA += a.saved ? 1 : 0
            savedB += b.saved ? 1 : 0
        }
        let shareA = Double(savedA) / Double(candidates.count), shareB = Double(savedB) / Double(candidates.count)
        #expect(shareA > 0.08 && shareA < 0.32 && shareB > 0.2 && shareB < 0.5 && savedB > savedA, "\(shareA) \(shareB)")
        // An offer without its own probability takes --offer-effect's, with the same draw.
        let r = Population(config: PopulationConfig(subscribers: 3000, seed: 7, start: Self.start))
        for i in candidates {
            let other = r.redeemOffer(i, at: t, effect: 0.35, offerId: "OFFER_C", effectByOffer: byOffer)
            #expect(other.saved == other.savedIf["OFFER_B"], "OFFER_C at 0.35 saves as OFFER_B at 0.35")
        }
        // Saved once: a later redemption saves with no offer.
        let savedOnce = candidates.first { i in q.offerRedemptions.contains { $0.subscriber == i && $0.saved } }
        #expect(savedOnce != nil)
        if let i = savedOnce {
            let again = q.redeemOffer(i, at: t + SimTime.hour, effect: 1, offerId: "OFFER_B", effectByOffer: byOffer)
            #expect(!again.saved && again.savedIf.values.allSatisfy { !$0 })
        }
    }

    @Test("POST /_sim/offers/redeem with offer_id: that offer's probability; offer_id and saved_if in the answer and in GET /_sim/offers")
    func redeemEndpoint() async throws {
        var options = SimulatorOptions()
        options.offerEffect = 0
        options.offerEffectByOffer = ["WIN": 1, "LOSE": 0]
        let sim = try await SimHarness.start(subscribers: 2000, options: options)
        defer { Task { try? await sim.stop() } }
        let p = sim.population, now = sim.service.clock.now()
        let candidates = Self.willNotRenew(p, at: now)
        #expect(candidates.count >= 3)
        func redeem(_ i: Int, _ offer: String?) async throws -> [String: Any] {
            var body: [String: Any] = ["original_transaction_id": p.originalTransactionId(i)]
            if let offer { body["offer_id"] = offer }
            let r = try await sim.post("/_sim/offers/redeem", body: try JSONSerialization.data(withJSONObject: body))
            #expect(r.status == 200, "\(r.text)")
            return r.json as? [String: Any] ?? [:]
        }
        let lose = try await redeem(candidates[0], "LOSE")
        #expect(lose["saved"] as? Bool == false && lose["eligible"] as? Bool == true && lose["offer_id"] as? String == "LOSE")
        #expect(lose["saved_if"] as? [String: Bool] == ["WIN": true, "LOSE": false])
        let win = try await redeem(candidates[1], "WIN")
        #expect(win["saved"] as? Bool == true && win["offer_id"] as? String == "WIN")
        #expect(win["saved_if"] as? [String: Bool] == ["WIN": true, "LOSE": false])
        #expect(p.state(candidates[1], at: now).reportedAutoRenew, "saved: auto-renew back on")
        let unnamed = try await redeem(candidates[2], nil)
        #expect(unnamed["saved"] as? Bool == false && unnamed["offer_id"] is NSNull, "no offer_id: --offer-effect (0)")
        #expect(Set(unnamed.keys).isSuperset(of: ["original_transaction_id", "at", "eligible", "saved", "would_have_stayed", "changed_outcome"]))
        let listed = try await sim.get("/_sim/offers", token: "").json as? [String: Any]
        let redemptions = listed?["redemptions"] as? [[String: Any]] ?? []
        #expect(redemptions.map { $0["offer_id"] as? String } == ["LOSE", "WIN", nil])
    }
}
