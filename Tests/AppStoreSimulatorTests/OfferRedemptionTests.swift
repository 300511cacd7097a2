@testable import AppStoreSimulator
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
}
