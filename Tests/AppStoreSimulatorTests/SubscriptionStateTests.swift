import Foundation
import Testing
@testable import AppStoreSimulator

/// Status derivation at chosen instants, straight from timelines.
@Suite struct SubscriptionStateTests {
    static let population = Population(config: PopulationConfig(subscribers: 4000, seed: 3, start: PopulationConfig.defaultStart))
    var p: Population { Self.population }

    /// The first subscriber whose timeline has an event matching `where`, and that event.
    func find(_ match: (TimelineEvent, [TimelineEvent]) -> Bool) -> (Int, TimelineEvent, [TimelineEvent])? {
        for i in 0..<p.count {
            let tl = Array(p.timeline(i))
            if let e = tl.first(where: { match($0, tl) }) { return (i, e, tl) }
        }
        return nil
    }

    @Test func activeRightAfterPurchase() throws {
        let (i, e, _) = try #require(find { e, _ in e.kind == .purchase && SimOffer(rawValue: e.b) == SimOffer.none })
        let s = p.state(i, at: e.time + SimTime.minute)
        #expect(s.status == 1)
        #expect(s.segment(at: s.at) == .active)
        #expect(s.transactionCount == 1)
        #expect(!p.exists(i, at: e.time - 1))
    }

    @Test func gracePeriodThenBillingRetryThenRecovery() throws {
        let (i, e, tl) = try #require(find { e, tl in
            e.kind == .billingFailure && e.d > 0 && tl.contains { $0.kind == .graceExpired && $0.time > e.time }
                && tl.contains { $0.kind == .recovery && $0.time > e.time }
        })
        let graceEnd = e.time + Int64(e.d) * SimTime.day
        var s = p.state(i, at: e.time + SimTime.hour)
        #expect(s.status == 4)
        #expect(s.segment(at: s.at) == .gracePeriod)
        #expect(s.gracePeriodExpiresDate == graceEnd)
        #expect(p.renewalPayload(i, s).isInBillingRetryPeriod == true)
        #expect(p.renewalPayload(i, s).eligibleWinBackOfferIds == [])
        s = p.state(i, at: graceEnd + SimTime.minute)
        #expect(s.status == 3)
        #expect(s.segment(at: s.at) == .billingRetry)
        let recovery = try #require(tl.first { $0.kind == .recovery && $0.time > e.time })
        let before = p.state(i, at: recovery.time - 1)
        s = p.state(i, at: recovery.time)
        #expect(s.status == 1)
        #expect(s.transactionCount == before.transactionCount + 1)
        #expect(s.latest.purchaseDate == recovery.time)
        #expect(s.latest.isRenewal)
    }

    @Test func billingRetryWithoutGrace() throws {
        let (i, e, _) = try #require(find { e, _ in e.kind == .billingFailure && e.d == 0 })
        let s = p.state(i, at: e.time + SimTime.minute)
        #expect(s.status == 3)
        #expect(s.segment(at: s.at) == .billingRetry)
        #expect(s.gracePeriodExpiresDate == nil)
    }

    @Test(arguments: [1, 2, 3, 4, 5])
    func expiredWithEachIntent(_ intent: Int) throws {
        let (i, e, _) = try #require(find { e, _ in e.kind == .expire && Int(e.a) == intent })
        let s = p.state(i, at: e.time)
        #expect(s.status == 2)
        #expect(s.expirationIntent == intent)
        let expected: [Segment] = [.churnedVoluntary, .churnedBilling, .churnedPriceIncrease, .churnedProductUnavailable, .churnedOther]
        #expect(s.segment(at: s.at) == expected[intent - 1])
        let renewal = p.renewalPayload(i, s)
        #expect(renewal.rawExpirationIntent == Int32(intent))
        #expect(renewal.rawAutoRenewStatus == 0)
        #expect((renewal.eligibleWinBackOfferIds?.isEmpty == false) == (intent == 1))
        #expect(p.state(i, at: e.time - 1).status != 2)
    }

    @Test func refundRevokesAndReversalRestores() throws {
        let (i, e, tl) = try #require(find { e, tl in e.kind == .refund && tl.contains { $0.kind == .refundReversed } })
        let reversal = try #require(tl.first { $0.kind == .refundReversed && $0.time > e.time })
        let revoked = p.state(i, at: e.time + 1)
        #expect(revoked.status == 5)
        #expect(revoked.segment(at: revoked.at) == .refunded)
        let tx = p.transactionPayload(i, revoked.latest, originalPurchaseDate: revoked.originalPurchaseDate, signedAt: revoked.at)
        #expect(tx.revocationDate?.rawValue == e.time)
        #expect(tx.rawRevocationReason != nil)
        let restored = p.state(i, at: reversal.time)
        #expect(restored.status != 5)
        let tx2 = p.transactionPayload(i, restored.latest, originalPurchaseDate: restored.originalPurchaseDate, signedAt: restored.at)
        #expect(tx2.revocationDate == nil)
        #expect(tx2.transactionId == tx.transactionId)
    }

    @Test func upgradeMarksReplacedTransaction() throws {
        let (i, e, _) = try #require(find { e, _ in e.kind == .upgrade })
        let (s, txs) = p.stateAndTransactions(i, at: e.time)
        #expect(s.latest.product == Int(e.a))
        #expect(s.latest.isRenewal == false)
        #expect(txs[txs.count - 2].upgradedAt == e.time)
        let old = p.transactionPayload(i, txs[txs.count - 2], originalPurchaseDate: s.originalPurchaseDate, signedAt: s.at)
        #expect(old.isUpgraded == true)
    }

    @Test func autoRenewOffAndPlanChangeAndPriceIncreaseSegments() throws {
        let (i, off, _) = try #require(find { e, _ in e.kind == .autoRenewOff })
        #expect(p.state(i, at: off.time).segment(at: off.time) == .willNotRenew)
        let (j, plan, _) = try #require(find { e, _ in e.kind == .planChangeScheduled })
        let ps = p.state(j, at: plan.time)
        if ps.autoRenew && ps.priceIncrease != .pending {
            #expect(ps.segment(at: plan.time) == .planChangePending)
            #expect(p.renewalPayload(j, ps).autoRenewProductId != p.renewalPayload(j, ps).productId)
        }
        let (k, pi, _) = try #require(find { e, tl in
            e.kind == .priceIncreaseNotified && e.a == 1 && !tl.contains { $0.kind == .autoRenewOff && $0.time < e.time + 30 * SimTime.day && $0.time > e.time - 40 * SimTime.day }
        })
        let ks = p.state(k, at: pi.time)
        #expect(ks.segment(at: pi.time) == .priceIncreasePending)
        #expect(p.renewalPayload(k, ks).rawPriceIncreaseStatus == 0)
    }

    @Test func segmentSinceIsTheTimeOfTheChange() throws {
        let (i, e, _) = try #require(find { e, _ in e.kind == .autoRenewOff })
        let s = p.state(i, at: e.time + 3 * SimTime.hour)
        if s.segment(at: s.at) == .willNotRenew { #expect(s.segmentSince == e.time) }
    }

    @Test func truthEventsMatchStateChanges() {
        for i in 0..<300 {
            for e in p.truthEvents(i) {
                let s = p.state(i, at: e.time)
                switch e.kind {
                case .expired: #expect(s.status == 2)
                case .refunded: #expect(s.status == 5)
                case .gracePeriodStarted: #expect(s.status == 4)
                case .billingRetryStarted, .gracePeriodExpired: #expect(s.status == 3)
                case .billingRecovered, .renewed, .resubscribed: #expect(s.status == 1)
                case .autoRenewDisabled: #expect(!s.autoRenew)
                case .autoRenewEnabled: #expect(s.autoRenew)
                case .planChangeScheduled: #expect(s.autoRenewProduct != s.latest.product)
                case .priceIncreasePending: #expect(s.priceIncrease == .pending)
                default: break
                }
            }
        }
    }

    @Test func timeParsingAndFormatting() {
        #expect(SimTime.format(0) == "1970-01-01T00:00:00Z")
        #expect(SimTime.parse("2026-01-01T00:00:00Z") == 1_767_225_600_000)
        #expect(SimTime.parse("2026-01-01T01:00:00+01:00") == 1_767_225_600_000)
        #expect(SimTime.parse("2026-01-01T01:00:00 01:00") == 1_767_225_600_000)
        #expect(SimTime.parse("2025-12-31T23:00:00-01:00") == 1_767_225_600_000)
        #expect(SimTime.parse("2026-01-01T00:00:00.250Z") == 1_767_225_600_250)
        #expect(SimTime.parse("2026-01-01") == 1_767_225_600_000)
        #expect(SimTime.parse("2026-02-30") == nil)
        #expect(SimTime.format(1_767_225_600_250) == "2026-01-01T00:00:00.250Z")
        #expect(SimTime.parseDuration("1d12h") == 36 * SimTime.hour)
        #expect(SimTime.parseDuration("90m") == 90 * SimTime.minute)
        #expect(SimTime.parseDuration("x") == nil)
        #expect(SimTime.format(SimTime.addMonths(SimTime.parse("2026-01-31T10:00:00Z")!, 1)) == "2026-02-28T10:00:00Z")
    }
}
