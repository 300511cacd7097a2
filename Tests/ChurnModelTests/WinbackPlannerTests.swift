import Foundation
import Testing
@testable import ChurnModel

@Suite("WinbackPlanner")
struct WinbackPlannerTests {
    static let trial = Apple(expires: day(7)).with {
        $0.transaction.offerType = 1
        $0.transaction.offerDiscountType = "FREE_TRIAL"
        $0.transaction.price = 0
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let apple: Apple
        let asOf: Date
        var policy = WinbackPolicy()
        let entry: WinbackEntry?
        var testDescription: String { name }
    }

    static func entry(
        _ campaign: WinbackCampaign, _ episode: String, _ reason: String, from notBefore: Date, until expiresAt: Date,
        offers: [String] = []
    ) -> WinbackEntry {
        WinbackEntry(campaign: campaign, episode: episode, productId: "pro.monthly", reason: reason, offerIds: offers,
                     notBefore: notBefore, expiresAt: expiresAt)
    }

    @Test("docs/contracts.md campaign table with its default timing", arguments: [
        Case(name: "save_offer: will_not_renew, now until the period ends", apple: Apple().autoRenew(false), asOf: day(2),
             entry: entry(.saveOffer, "period:w1", "will_not_renew", from: day(2), until: day(30))),
        Case(name: "save_offer: free trial with auto-renew off", apple: WinbackPlannerTests.trial.autoRenew(false), asOf: day(1),
             entry: entry(.saveOffer, "period:w1", "will_not_renew", from: day(1), until: day(7))),
        Case(name: "save_offer: price_increase_pending", apple: Apple().with { $0.renewal?.priceIncreaseStatus = 0 }, asOf: day(20),
             entry: entry(.saveOffer, "period:w1", "price_increase_pending", from: day(20), until: day(30))),
        Case(name: "billing_fix: a day before grace ends", apple: Apple().billingFailed(grace: day(36)), asOf: day(31),
             entry: entry(.billingFix, "retry:w1", "grace_period", from: day(35), until: day(90))),
        Case(name: "billing_fix: grace shorter than the lead time starts at the failure", apple: Apple().billingFailed(grace: day(30.5)),
             asOf: day(30.2), entry: entry(.billingFix, "retry:w1", "grace_period", from: day(30), until: day(90))),
        Case(name: "billing_fix: after grace, same episode and timing", apple: Apple().billingFailed(grace: day(36)).with { $0.status = 3 },
             asOf: day(37), entry: entry(.billingFix, "retry:w1", "billing_retry", from: day(35), until: day(90))),
        Case(name: "billing_fix: without grace, after 6 days of retry", apple: Apple().billingFailed(), asOf: day(31),
             entry: entry(.billingFix, "retry:w1", "billing_retry", from: day(36), until: day(90))),
        Case(name: "billing_fix: configured retry delay", apple: Apple().billingFailed(), asOf: day(31),
             policy: WinbackPolicy(retryDelay: 3 * WinbackPolicy.day),
             entry: entry(.billingFix, "retry:w1", "billing_retry", from: day(33), until: day(90))),
        Case(name: "winback_offer: voluntary, with Apple's offer ids", apple: Apple().expired(intent: 1, winBackOffers: ["wb_half", "wb_free"]),
             asOf: day(31), entry: entry(.winbackOffer, "expired:w1", "churned_voluntary", from: day(30), until: day(90),
                                         offers: ["wb_half", "wb_free"])),
        Case(name: "winback_offer: price increase refused", apple: Apple().expired(intent: 3), asOf: day(31),
             entry: entry(.winbackOffer, "expired:w1", "churned_price_increase", from: day(30), until: day(90))),
        Case(name: "winback_offer: churned_other (unknown intent)", apple: Apple().expired(intent: 9), asOf: day(31),
             entry: entry(.winbackOffer, "expired:w1", "churned_other", from: day(30), until: day(90))),
        Case(name: "winback_offer: configured horizon", apple: Apple().expired(intent: 1), asOf: day(31),
             policy: WinbackPolicy(winbackHorizon: 30 * WinbackPolicy.day),
             entry: entry(.winbackOffer, "expired:w1", "churned_voluntary", from: day(30), until: day(60))),
        Case(name: "resubscribe_prompt: product not for sale", apple: Apple().expired(intent: 4), asOf: day(31),
             entry: entry(.resubscribePrompt, "expired:w1", "churned_product_unavailable", from: day(30), until: day(90))),
        Case(name: "resubscribe_prompt: billing, retry ended at detection", apple: Apple().expired(intent: 2), asOf: day(50),
             entry: entry(.resubscribePrompt, "expired:w1", "churned_billing", from: day(50), until: day(110))),
        Case(name: "resubscribe_prompt: billing, at most 60 days of retry", apple: Apple().expired(intent: 2), asOf: day(100),
             entry: entry(.resubscribePrompt, "expired:w1", "churned_billing", from: day(90), until: day(150))),
        Case(name: "none: refunded", apple: Apple().revoked(at: day(3)), asOf: day(4), entry: nil),
        Case(name: "none: plan_change_pending", apple: Apple().with { $0.renewal?.autoRenewProductId = "lite.monthly" }, asOf: day(4),
             entry: nil),
        Case(name: "none: active", apple: Apple(), asOf: day(4), entry: nil),
        Case(name: "none: unknown status", apple: Apple().expired(intent: 1).with { $0.status = 8 }, asOf: day(31), entry: nil),
        Case(name: "none: win-back horizon passed", apple: Apple().expired(intent: 1), asOf: day(91), entry: nil),
        Case(name: "none: save window closed (period over)", apple: Apple().autoRenew(false), asOf: day(30.5), entry: nil),
        Case(name: "none: family member (default policy)", apple: Apple().autoRenew(false).with { $0.transaction.inAppOwnershipType = "FAMILY_SHARED" },
             asOf: day(2), entry: nil),
        Case(name: "family member when the policy includes them",
             apple: Apple().autoRenew(false).with { $0.transaction.inAppOwnershipType = "FAMILY_SHARED" }, asOf: day(2),
             policy: WinbackPolicy(includeFamilyShared: true),
             entry: entry(.saveOffer, "period:w1", "will_not_renew", from: day(2), until: day(30))),
    ])
    func campaign(_ c: Case) {
        let decision = WinbackPlanner.decide(previous: nil, current: c.apple.snapshot(at: c.asOf), asOf: c.asOf, policy: c.policy)
        #expect(decision.entries == (c.entry.map { [$0] } ?? []))
        #expect(decision.obsolete.isEmpty)
    }

    struct ObsoleteCase: Sendable, CustomTestStringConvertible {
        let name: String
        let before: Apple
        let beforeAt: Date
        let after: Apple
        let afterAt: Date
        let obsolete: [ObsoleteEpisode]
        let create: [WinbackCampaign]
        var testDescription: String { name }
    }

    @Test("episodes whose reason went away become obsolete", arguments: [
        ObsoleteCase(name: "auto-renew back on", before: Apple().autoRenew(false), beforeAt: day(2), after: Apple(), afterAt: day(4),
                     obsolete: [ObsoleteEpisode(campaign: .saveOffer, episode: "period:w1", reason: "auto_renew_enabled")], create: []),
        ObsoleteCase(name: "downgrade instead of leaving", before: Apple().autoRenew(false), beforeAt: day(2),
                     after: Apple().with { $0.renewal?.autoRenewProductId = "lite.monthly" }, afterAt: day(4),
                     obsolete: [ObsoleteEpisode(campaign: .saveOffer, episode: "period:w1", reason: "plan_change_scheduled")], create: []),
        ObsoleteCase(name: "price increase accepted", before: Apple().with { $0.renewal?.priceIncreaseStatus = 0 }, beforeAt: day(20),
                     after: Apple().with { $0.renewal?.priceIncreaseStatus = 1 }, afterAt: day(21),
                     obsolete: [ObsoleteEpisode(campaign: .saveOffer, episode: "period:w1", reason: "price_increase_accepted")], create: []),
        ObsoleteCase(name: "billing recovered", before: Apple().billingFailed(), beforeAt: day(31), after: Apple().newPeriod(2, at: day(33)),
                     afterAt: day(34),
                     obsolete: [ObsoleteEpisode(campaign: .billingFix, episode: "retry:w1", reason: "billing_recovered")], create: []),
        ObsoleteCase(name: "retry ran out: billing fix gives way to a resubscribe prompt", before: Apple().billingFailed(), beforeAt: day(59),
                     after: Apple().expired(intent: 2), afterAt: day(60),
                     obsolete: [ObsoleteEpisode(campaign: .billingFix, episode: "retry:w1", reason: "expired")], create: [.resubscribePrompt]),
        ObsoleteCase(name: "resubscribed", before: Apple().expired(intent: 1), beforeAt: day(31),
                     after: Apple().newPeriod(2, at: day(40), reason: "PURCHASE"), afterAt: day(41),
                     obsolete: [ObsoleteEpisode(campaign: .winbackOffer, episode: "expired:w1", reason: "resubscribed")], create: []),
        ObsoleteCase(name: "refunded while at risk", before: Apple().autoRenew(false), beforeAt: day(2), after: Apple().revoked(at: day(3)),
                     afterAt: day(4),
                     obsolete: [ObsoleteEpisode(campaign: .saveOffer, episode: "period:w1", reason: "refunded")], create: []),
        ObsoleteCase(name: "renewed, then auto-renew off again: a new period is a new episode", before: Apple().autoRenew(false),
                     beforeAt: day(29), after: Apple().newPeriod(2, at: day(29.5)).autoRenew(false), afterAt: day(29.8),
                     obsolete: [ObsoleteEpisode(campaign: .saveOffer, episode: "period:w1", reason: "renewed")], create: [.saveOffer]),
        ObsoleteCase(name: "a save offer whose period ended is left to expire", before: Apple().autoRenew(false), beforeAt: day(29),
                     after: Apple().expired(intent: 1), afterAt: day(31), obsolete: [], create: [.winbackOffer]),
    ])
    func obsolete(_ c: ObsoleteCase) {
        let decision = WinbackPlanner.decide(previous: c.before.snapshot(at: c.beforeAt), current: c.after.snapshot(at: c.afterAt), asOf: c.afterAt)
        #expect(decision.obsolete == c.obsolete)
        #expect(decision.entries.map(\.campaign) == c.create)
    }

    @Test("idempotent: the same state gives the same episode on every run and every night")
    func idempotent() {
        let atRisk = Apple().autoRenew(false)
        let first = WinbackPlanner.decide(previous: nil, current: atRisk.snapshot(at: day(2)), asOf: day(2))
        let rerun = WinbackPlanner.decide(previous: nil, current: atRisk.snapshot(at: day(2)), asOf: day(2))
        let nextNight = WinbackPlanner.decide(previous: atRisk.snapshot(at: day(2)), current: atRisk.snapshot(at: day(3)), asOf: day(3))
        #expect(rerun == first)
        #expect(nextNight.entries.map(\.episodeRef) == first.entries.map(\.episodeRef))
        #expect(nextNight.obsolete.isEmpty)
    }

    @Test("a stale snapshot or an unknown status changes nothing")
    func nothingToDo() {
        let stored = Apple().autoRenew(false).snapshot(at: day(10))
        let stale = WinbackPlanner.decide(previous: stored, current: Apple().with { $0.signedAt = day(9) }.snapshot(at: day(11)), asOf: day(11))
        #expect(stale == WinbackDecision(stale: true))
        let unknown = WinbackPlanner.decide(previous: stored, current: Apple().with { $0.status = 6 }.snapshot(at: day(11)), asOf: day(11))
        #expect(unknown == WinbackDecision())
    }

    @Test("campaign names are exactly docs/contracts.md's; each campaign's segments", arguments: [
        (WinbackCampaign.saveOffer, "save_offer", [Segment.willNotRenew, .priceIncreasePending]),
        (.billingFix, "billing_fix", [.gracePeriod, .billingRetry]),
        (.winbackOffer, "winback_offer", [.churnedVoluntary, .churnedPriceIncrease, .churnedOther]),
        (.resubscribePrompt, "resubscribe_prompt", [.churnedBilling, .churnedProductUnavailable]),
    ])
    func campaignNames(_ campaign: WinbackCampaign, _ name: String, _ segments: [Segment]) {
        #expect(campaign.rawValue == name)
        #expect(Segment.allCases.filter { WinbackCampaign(segment: $0) == campaign } == segments)
    }

    @Test("default policy is docs/contracts.md's")
    func defaults() {
        let policy = WinbackPolicy.default
        #expect(policy.graceLeadTime == 86_400)
        #expect(policy.retryDelay == 6 * 86_400)
        #expect(policy.winbackHorizon == 60 * 86_400)
        #expect(policy.billingRetryLimit == 60 * 86_400)
        #expect(policy.includeFamilyShared == false)
    }
}
