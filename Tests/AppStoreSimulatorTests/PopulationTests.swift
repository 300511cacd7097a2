import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct PopulationTests {
    static let start = PopulationConfig.defaultStart

    @Test func sameSeedGivesByteIdenticalTruthAndEvents() {
        let a = Population(config: PopulationConfig(subscribers: 3000, seed: 42, start: Self.start))
        let b = Population(config: PopulationConfig(subscribers: 3000, seed: 42, start: Self.start))
        let c = Population(config: PopulationConfig(subscribers: 3000, seed: 43, start: Self.start))
        let at = Self.start + 20 * SimTime.day
        let fault: (Int) -> String? = { _ in nil }
        #expect(TruthReport.truth(a, at: at, fault: fault) == TruthReport.truth(b, at: at, fault: fault))
        #expect(TruthReport.events(a, from: Self.start, to: at) == TruthReport.events(b, from: Self.start, to: at))
        #expect(ClientFiles.csv(a) == ClientFiles.csv(b))
        #expect(TruthReport.truth(a, at: at, fault: fault) != TruthReport.truth(c, at: at, fault: fault))
    }

    @Test func subscriberDoesNotDependOnPopulationSize() {
        let small = Population(config: PopulationConfig(subscribers: 500, seed: 9, start: Self.start))
        let large = Population(config: PopulationConfig(subscribers: 2000, seed: 9, start: Self.start))
        for i in 0..<498 {
            #expect(Array(small.timeline(i)) == Array(large.timeline(i)))
            #expect(small.originalTransactionId(i) == large.originalTransactionId(i))
        }
    }

    @Test func timelinesAreSortedAndStartBeforeTheStart() {
        let p = Population(config: PopulationConfig(subscribers: 3000, seed: 5, start: Self.start))
        for i in 0..<p.count {
            let tl = Array(p.timeline(i))
            #expect(tl.first?.kind == .purchase)
            #expect(tl.first!.time < Self.start)
            #expect(zip(tl, tl.dropFirst()).allSatisfy { $0.time <= $1.time }, "subscriber \(i) out of order")
        }
    }

    /// Every behaviour of the population occurs at a plausible rate (printed for docs/simulator.md).
    @Test func behavioursOccurAtPlausibleRates() {
        let p = Population(config: PopulationConfig(subscribers: 10_000, seed: 1, start: Self.start))
        let tally = BehaviourTally(p, productsAt: Self.start + 200 * SimTime.day)
        let (has, count, recoveryDelays, offTimings) = (tally.has, tally.count, tally.recoveryDelays, tally.offTimings)
        let n = Double(p.count)
        var lines: [String] = []
        for k in has.keys.sorted() {
            lines.append(String(format: "  %-28@ %6.2f%% of subscribers (%d events)", k as NSString, Double(has[k]!) / n * 100, count[k] ?? has[k]!))
        }
        print("behaviour rates in 10,000 subscribers, seed 1:\n" + lines.joined(separator: "\n"))
        let fast = recoveryDelays.filter { $0 <= 7 * SimTime.day }.count
        let fastShare = Double(fast) / Double(max(1, recoveryDelays.count))
        let offTotal = Double(offTimings.early + offTimings.late + offTimings.other)
        print(String(format: "  recoveries within 7 days: %.1f%%; auto-renew off right after a charge %.1f%%, in the days before the end %.1f%%",
            fastShare * 100, Double(offTimings.early) / offTotal * 100, Double(offTimings.late) / offTotal * 100))

        func share(_ k: String) -> Double { Double(has[k] ?? 0) / n }
        // Every behaviour occurs, at a plausible rate.
        #expect((0.25...0.45).contains(share("free_trial")))
        #expect((0.01...0.10).contains(share("intro_offer")))
        #expect((0.002...0.05).contains(share("promotional_offer")))
        #expect((0.001...0.05).contains(share("win_back_offer")))
        #expect((0.01...0.06).contains(share("offer_code")))
        #expect((0.25...0.70).contains(share("auto_renew_off")))
        #expect((0.03...0.20).contains(share("auto_renew_back_on")))
        #expect((0.10...0.50).contains(share("billing_failure")))
        #expect((0.05...0.40).contains(share("billing_recovered")))
        #expect(share("grace_3d") > 0.01 && share("grace_16d") > 0.005 && share("grace_28d") > 0.0005)
        #expect(share("grace_expired") > 0.005)
        #expect((0.15...0.60).contains(share("expired_intent_1")))
        #expect((0.02...0.25).contains(share("expired_intent_2")))
        #expect((0.002...0.08).contains(share("expired_intent_3")))
        #expect((0.001...0.05).contains(share("expired_intent_4")))
        #expect((0.002...0.05).contains(share("expired_intent_5")))
        #expect((0.01...0.10).contains(share("refund")))
        #expect(share("refund_reversed") > 0.001 && share("refund_reversed") < share("refund"))
        #expect(share("family_revoke") > 0)
        #expect((0.005...0.10).contains(share("upgrade")))
        #expect((0.005...0.15).contains(share("plan_change_scheduled")))
        #expect(share("plan_change_cancelled") > 0.001)
        #expect((0.01...0.30).contains(share("price_increase_consent")))
        #expect(share("price_increase_no_consent") > 0.001)
        #expect(share("price_increase_accepted") > 0.01)
        #expect((0.02...0.15).contains(share("resubscribe")))
        #expect((0.02...0.09).contains(share("family_shared")))
        #expect((0.01...0.06).contains(share("sandbox")))
        #expect((0.04...0.12).contains(share("both_groups")))
        #expect((0.05...0.15).contains(share("receipt_data")))
        #expect(fastShare > 0.6 && fastShare < 0.95)
        #expect(recoveryDelays.allSatisfy { $0 > 0 && $0 <= 60 * SimTime.day })
        #expect(Double(offTimings.early + offTimings.late) / offTotal > 0.7)
    }
}

/// What `behavioursOccurAtPlausibleRates` counts over a population: per behaviour, the
/// subscribers who show it (`has`) and its occurrences (`count`).
struct BehaviourTally {
    var has: [String: Int] = [:]
    var count: [String: Int] = [:]
    var recoveryDelays: [Int64] = []
    var offTimings = (early: 0, late: 0, other: 0)
    private var seen: Set<String> = []

    init(_ p: Population, productsAt: Int64) {
        for i in 0..<p.count { add(i, p, productsAt: productsAt) }
    }

    private mutating func mark(_ k: String) {
        seen.insert(k)
        count[k, default: 0] += 1
    }

    private mutating func add(_ i: Int, _ p: Population, productsAt: Int64) {
        seen = []
        let tl = Array(p.timeline(i))
        var period = (start: tl[0].time, end: SimSchedule.expires(
            purchase: tl[0].time, unit: p.catalog.products[Int(tl[0].a)].unit, offer: SimOffer(rawValue: tl[0].b)!))
        var failureAt: Int64?
        for e in tl {
            if e.createsTransaction {
                let offer = SimOffer(rawValue: e.b)!
                switch offer {
                case .freeTrial: mark("free_trial")
                case .introPayAsYouGo: mark("intro_offer")
                case .promotional: mark("promotional_offer")
                case .winBack: mark("win_back_offer")
                case .offerCode: mark("offer_code")
                case .none: break
                }
                period = (e.time, SimSchedule.expires(purchase: e.time, unit: p.catalog.products[Int(e.a)].unit, offer: offer))
            }
            mark(e, period: period, failureAt: &failureAt)
        }
        let r = p.records[i]
        if r.flags.contains(.familyShared) { seen.insert("family_shared") }
        if r.flags.contains(.sandbox) { seen.insert("sandbox") }
        if r.flags.contains(.receipt) { seen.insert("receipt_data") }
        if r.partner >= 0 { seen.insert("both_groups") }
        let s = p.state(i, at: productsAt)
        if s.autoRenewProduct != s.latest.product || s.latest.product != Int(tl[0].a) { seen.insert("product_changed") }
        for k in seen { has[k, default: 0] += 1 }
    }

    private mutating func mark(_ e: TimelineEvent, period: (start: Int64, end: Int64), failureAt: inout Int64?) {
        switch e.kind {
        case .renewal: mark("renewal")
        case .autoRenewOff:
            mark("auto_renew_off")
            let len = period.end - period.start
            if e.time - period.start <= min(2 * SimTime.day, len / 4) {
                offTimings.early += 1
            } else if period.end - e.time <= min(5 * SimTime.day, len * 3 / 10) {
                offTimings.late += 1
            } else {
                offTimings.other += 1
            }
        case .autoRenewOn: mark("auto_renew_back_on")
        case .billingFailure:
            mark("billing_failure")
            failureAt = e.time
            if e.d > 0 { mark("grace_\(e.d)d") }
        case .recovery:
            mark("billing_recovered")
            if let f = failureAt { recoveryDelays.append(e.time - f) }
        case .graceExpired: mark("grace_expired")
        case .expire: mark("expired_intent_\(e.a)")
        case .refund: mark("refund")
        case .refundReversed: mark("refund_reversed")
        case .familyRevoke: mark("family_revoke")
        case .upgrade: mark("upgrade")
        case .planChangeScheduled: mark("plan_change_scheduled")
        case .planChangeCancelled: mark("plan_change_cancelled")
        case .priceIncreaseNotified: mark(e.a == 1 ? "price_increase_consent" : "price_increase_no_consent")
        case .priceIncreaseAccepted: mark("price_increase_accepted")
        case .resubscribe: mark("resubscribe")
        case .consumptionRequest: mark("refund_requested")
        case .refundDeclined: mark("refund_declined")
        case .purchase: break
        }
    }
}
