import Foundation
import Testing
@testable import ChurnModel

/// Plays nightly polls through change detection and the win-back planner, as the poller does,
/// and returns the outcome of the first entry of `campaign` (nil while it is open).
private func outcome(of campaign: WinbackCampaign, _ polls: [(Double, Apple)]) -> RetentionOutcome? {
    var previous: SubscriptionSnapshot?
    var open: WinbackEntry?
    var sign: Date?
    for (n, apple) in polls {
        let asOf = day(n)
        let current = apple.snapshot(at: asOf)
        let events = ChangeDetector.events(previous: previous, current: current, asOf: asOf).events
        if let entry = open {
            switch RetentionOutcomeRules.judge(campaign: entry.campaign, horizonEnd: entry.expiresAt, goodSign: sign, events: events, asOf: asOf) {
            case .decided(let outcome): return outcome
            case .open(let goodSign): sign = goodSign
            }
        }
        if open == nil {
            open = WinbackPlanner.decide(previous: previous, current: current, asOf: asOf).entries.first { $0.campaign == campaign }
        }
        previous = current
    }
    return nil
}

@Suite("Retention outcomes on stories")
struct RetentionOutcomeTests {
    let a = Apple()

    @Test func savedByReEnablingAutoRenewIsDecidedByTheRenewalAndDatedByTheSign() {
        let polls: [(Double, Apple)] = [(0.5, a), (2.5, a.autoRenew(false)), (3.5, a.autoRenew(false)), (4.5, a)]
        #expect(outcome(of: .saveOffer, polls) == nil, "a good sign decides nothing before the period ends")
        let o = outcome(of: .saveOffer, polls + [(30.5, a.newPeriod(2, at: day(30)))])
        #expect(o?.kind == .saved)
        #expect(o?.reason == "renewed")
        #expect(o.map { $0.at >= day(3.5) && $0.at <= day(4.5) } == true, "dated by the sign: \(String(describing: o?.at))")
    }

    @Test func aGoodSignUndoneBeforeThePeriodEndsIsALoss() {
        let o = outcome(of: .saveOffer, [(0.5, a), (2.5, a.autoRenew(false)), (4.5, a), (10.5, a.autoRenew(false)),
                                         (30.5, a.expired(intent: 1))])
        #expect(o == RetentionOutcome(kind: .lost, reason: "expired", at: day(30)))
    }

    @Test func savedByMovingToAnotherPlanInsteadOfLeaving() {
        let lite = a.with { $0.renewal?.autoRenewProductId = "lite.monthly" }
        #expect(outcome(of: .saveOffer, [(0.5, a), (10.5, a.autoRenew(false)), (11.5, lite)]) == nil)
        let o = outcome(of: .saveOffer, [(0.5, a), (10.5, a.autoRenew(false)), (11.5, lite), (30.5, lite.newPeriod(2, at: day(30)))])
        #expect(o?.kind == .saved)
        #expect(o.map { $0.at >= day(10.5) && $0.at <= day(11.5) } == true, "dated by the plan change: \(String(describing: o?.at))")
    }

    @Test func aSaveSeenMonthsLaterIsASaveDatedByItsSign() {
        // Not observed at the period's end: the next observation, two months on, shows a later renewal only.
        let events = [ChurnEvent(type: .renewed, occurredAt: day(60))]
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), goodSign: day(4), events: events, asOf: day(65))
            == .decided(RetentionOutcome(kind: .saved, reason: "renewed", at: day(4))))
        let expiredLater = [ChurnEvent(type: .expired, occurredAt: day(60))]
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: expiredLater, asOf: day(65)).outcome?.kind == .saved,
                "a period that ended at day 60 began after the horizon")
        #expect(RetentionOutcomeRules.judge(campaign: .billingFix, horizonEnd: day(30), events: events, asOf: day(65)).outcome?.kind == .lost,
                "other campaigns are settled within their horizon only")
    }

    @Test func aRenewalAppleCouldNotChargeIsStillASaveOffersSave() {
        let o = outcome(of: .saveOffer, [(0.5, a), (5.5, a.autoRenew(false)), (6.5, a), (30.5, a.billingFailed())])
        #expect(o?.kind == .saved)
        #expect(o?.reason == "billing_retry_started" || o?.reason == "grace_period_started", "\(String(describing: o))")
    }

    @Test func aRenewalDatedWithinTheSettleWindowCountsOneLaterDoesNot() {
        let renewed = [ChurnEvent(type: .renewed, occurredAt: day(30).addingTimeInterval(3600))]
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: renewed, asOf: day(31)).outcome?.kind == .saved)
        let back = [ChurnEvent(type: .resubscribed, occurredAt: day(31.5))]
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: back, asOf: day(32))
            == .decided(RetentionOutcome(kind: .lost, reason: RetentionOutcome.horizon, at: day(30))), "a return after the horizon is no save")
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: [], asOf: day(30.5)) == .open(goodSign: nil),
                "still open within the settle window")
    }

    @Test func savedByBillingRecovery() {
        let o = outcome(of: .billingFix, [(0.5, a), (30.5, a.billingFailed()), (31.5, a.billingFailed()), (33.5, a.newPeriod(2, at: day(33)))])
        #expect(o == RetentionOutcome(kind: .saved, reason: "billing_recovered", at: day(33)))
    }

    @Test func savedByResubscribing() {
        let gone = a.expired(intent: 1, winBackOffers: ["wb_half"])
        let back = gone.newPeriod(2, at: day(40), reason: "PURCHASE")
        let o = outcome(of: .winbackOffer, [(0.5, a), (15.5, a.autoRenew(false)), (30.5, gone), (35.5, gone), (40.5, back)])
        #expect(o == RetentionOutcome(kind: .saved, reason: "resubscribed", at: day(40)))
    }

    @Test func lostWhenThePeriodEndsWithAutoRenewOff() {
        let o = outcome(of: .saveOffer, [(0.5, a), (15.5, a.autoRenew(false)), (30.5, a.expired(intent: 1))])
        #expect(o == RetentionOutcome(kind: .lost, reason: "expired", at: day(30)))
    }

    @Test func lostWhenTheWinbackHorizonClosesWithoutAResubscribe() {
        let gone = a.expired(intent: 1)
        #expect(outcome(of: .winbackOffer, [(0.5, a), (30.5, gone), (60.5, gone)]) == nil, "open within the 60-day horizon")
        let o = outcome(of: .winbackOffer, [(0.5, a), (30.5, gone), (60.5, gone), (95.5, gone)])
        #expect(o == RetentionOutcome(kind: .lost, reason: RetentionOutcome.horizon, at: day(90)))
    }

    @Test func aResubscribeAfterTheHorizonIsNotASave() {
        let gone = a.expired(intent: 1)
        let o = outcome(of: .winbackOffer, [(0.5, a), (30.5, gone), (100.5, gone.newPeriod(2, at: day(100), reason: "PURCHASE"))])
        #expect(o == RetentionOutcome(kind: .lost, reason: RetentionOutcome.horizon, at: day(90)))
    }

    @Test func aLossBeforeASaveAtTheSameTimeIsALoss() {
        let events = [ChurnEvent(type: .renewed, occurredAt: day(30)), ChurnEvent(type: .refunded, occurredAt: day(30))]
        let o = RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: events, asOf: day(31)).outcome
        #expect(o?.kind == .lost)
        #expect(o?.reason == "refunded")
    }

    @Test func eventsThatDecideNothingLeaveTheEntryOpen() {
        let events = [ChurnEvent(type: .autoRenewDisabled, occurredAt: day(5)), ChurnEvent(type: .priceIncreasePending, occurredAt: day(6))]
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: events, asOf: day(7)) == .open(goodSign: nil))
        let signs = [ChurnEvent(type: .autoRenewEnabled, occurredAt: day(8)), ChurnEvent(type: .priceIncreaseAccepted, occurredAt: day(9))]
        #expect(RetentionOutcomeRules.judge(campaign: .saveOffer, horizonEnd: day(30), events: signs, asOf: day(10)) == .open(goodSign: day(8)),
                "the first good sign stands")
    }
}

@Suite("Uplift interval (Newcombe's hybrid score)")
struct UpliftEstimateTests {
    /// Newcombe (1998), Statistics in Medicine 17:873-890, table II, method 10.
    @Test(arguments: [
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        (6, 7, 2, 7, 0.0582, 0.8062),
        (5, 56, 0, 29, -0.0381, 0.1926),
    ])
    func publishedIntervals(_ x1: Int, _ n1: Int, _ x2: Int, _ n2: Int, _ low: Double, _ high: Double) throws {
        let e = try #require(UpliftEstimate(treatedSaved: x1, treated: n1, heldOutSaved: x2, heldOut: n2))
        #expect(abs(e.uplift - (Double(x1) / Double(n1) - Double(x2) / Double(n2))) < 1e-12)
        #expect(abs(e.low - low) < 0.00005, "low \(e.low)")
        #expect(abs(e.high - high) < 0.00005, "high \(e.high)")
    }

    @Test func nothingToSayWithoutBothGroups() {
        #expect(UpliftEstimate(treatedSaved: 3, treated: 10, heldOutSaved: 0, heldOut: 0) == nil)
        #expect(UpliftEstimate(treatedSaved: 0, treated: 0, heldOutSaved: 1, heldOut: 4) == nil)
    }

    @Test func smallGroupsAreFlagged() throws {
        #expect(try #require(UpliftEstimate(treatedSaved: 9, treated: 10, heldOutSaved: 3, heldOut: 10)).tooFewToSay)
        #expect(try #require(UpliftEstimate(treatedSaved: 56, treated: 70, heldOutSaved: 48, heldOut: 80)).tooFewToSay == false)
    }

    @Test func extremeSharesStayWithinBounds() throws {
        let e = try #require(UpliftEstimate(treatedSaved: 10, treated: 10, heldOutSaved: 0, heldOut: 20))
        #expect(e.high <= 1 && e.low > 0.6)
    }
}
