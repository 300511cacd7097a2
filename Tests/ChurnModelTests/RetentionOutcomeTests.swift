import Foundation
import Testing
@testable import ChurnModel

/// Plays nightly polls through change detection and the win-back planner, as the poller does,
/// and returns the outcome of the first entry of `campaign` (nil while it is open).
private func outcome(of campaign: WinbackCampaign, _ polls: [(Double, Apple)]) -> RetentionOutcome? {
    var previous: SubscriptionSnapshot?
    var open: WinbackEntry?
    for (n, apple) in polls {
        let asOf = day(n)
        let current = apple.snapshot(at: asOf)
        let events = ChangeDetector.events(previous: previous, current: current, asOf: asOf).events
        if let entry = open,
           let decided = RetentionOutcomeRules.decide(campaign: entry.campaign, horizonEnd: entry.expiresAt, events: events, asOf: asOf) {
            return decided
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

    @Test func savedByReEnablingAutoRenew() {
        let o = outcome(of: .saveOffer, [(0.5, a), (2.5, a.autoRenew(false)), (3.5, a.autoRenew(false)), (4.5, a)])
        #expect(o?.kind == .saved)
        #expect(o?.reason == "auto_renew_enabled")
        #expect(o.map { $0.at >= day(3.5) && $0.at <= day(4.5) } == true)
    }

    @Test func savedByMovingToAnotherPlanInsteadOfLeaving() {
        let lite = a.with { $0.renewal?.autoRenewProductId = "lite.monthly" }
        let o = outcome(of: .saveOffer, [(0.5, a), (10.5, a.autoRenew(false)), (11.5, lite)])
        #expect(o?.kind == .saved)
        #expect(o?.reason == "plan_change_scheduled")
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
        let o = RetentionOutcomeRules.decide(campaign: .saveOffer, horizonEnd: day(30), events: events, asOf: day(31))
        #expect(o?.kind == .lost)
        #expect(o?.reason == "refunded")
    }

    @Test func eventsThatDecideNothingLeaveTheEntryOpen() {
        let events = [ChurnEvent(type: .autoRenewDisabled, occurredAt: day(5)), ChurnEvent(type: .priceIncreasePending, occurredAt: day(6))]
        #expect(RetentionOutcomeRules.decide(campaign: .saveOffer, horizonEnd: day(30), events: events, asOf: day(7)) == nil)
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
