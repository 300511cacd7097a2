import Foundation
import Testing
@testable import AppStoreSimulator

/// Refund requests in the generated timelines: nothing else of a seed moves, they come at the
/// configured rates, and they change no state.
@Suite struct RefundRequestTimelineTests {
    static let start = PopulationConfig.defaultStart
    static let hour = SimTime.hour

    /// What the simulator generated before refund requests were modelled (commit bae8444, main):
    /// `GoldenDigest` of seed 7 with 3,000 subscribers and seed 1 with 2,000.
    static let golden: [(seed: UInt64, subscribers: Int, timelines: UInt64, truth: UInt64, events: UInt64, notifications: UInt64)] = [
        (7, 3000, 14_910_979_203_012_128_298, 12_011_333_902_627_572_295, 3_234_879_185_577_240_064, 9_566_920_602_730_410_748),
        (1, 2000, 15_166_169_855_771_743_847, 14_890_924_026_849_015_623, 18_074_144_421_082_861_980, 12_141_555_011_508_318_915),
    ]

    static func population(_ seed: UInt64, _ n: Int, share: Double? = nil, declined: Double? = nil) -> Population {
        var c = PopulationConfig(subscribers: n, seed: seed, start: start)
        if let share { c.consumptionRequestShare = share }
        if let declined { c.refundDeclinedRate = declined }
        return Population(config: c)
    }

    @Test("with both knobs at 0 a seed generates exactly what it generated before (timelines, truth, events, notifications)")
    func unchangedWithKnobsAtZero() {
        for g in Self.golden {
            let p = Self.population(g.seed, g.subscribers, share: 0, declined: 0)
            #expect(GoldenDigest.timelines(p) == g.timelines, "seed \(g.seed)")
            #expect(GoldenDigest.truth(p) == g.truth, "seed \(g.seed)")
            #expect(GoldenDigest.events(p) == g.events, "seed \(g.seed)")
            #expect(GoldenDigest.notifications(p) == g.notifications, "seed \(g.seed)")
        }
    }

    @Test("with the default knobs every other event, state and notification (UUIDs, delivery) is what it was")
    func otherEventsUnchanged() {
        let requestTypes: Set<String> = ["CONSUMPTION_REQUEST", "REFUND_DECLINED"]
        let requestEvents: Set<String> = ["refund_requested", "refund_declined"]
        for g in Self.golden {
            let p = Self.population(g.seed, g.subscribers)
            let added = (0..<p.count).reduce(0) { $0 + p.timeline($1).filter(\.isRefundRequest).count }
            #expect(added > 10, "seed \(g.seed): \(added) refund request events")
            #expect(GoldenDigest.timelines(p) != g.timelines)
            #expect(GoldenDigest.timelines(p, skip: \.isRefundRequest) == g.timelines, "seed \(g.seed)")
            #expect(GoldenDigest.truth(p) == g.truth, "seed \(g.seed)")
            #expect(GoldenDigest.events(p, skip: requestEvents.contains) == g.events, "seed \(g.seed)")
            #expect(GoldenDigest.notifications(p, skip: requestTypes.contains) == g.notifications, "seed \(g.seed)")
        }
    }

    @Test("refund requests change no state: the fold at any moment is the fold without them")
    func requestsChangeNoState() {
        let p = Self.population(7, 3000, declined: 0.05)
        var checked = 0
        for i in 0..<p.count {
            let tl = Array(p.timeline(i))
            guard tl.contains(where: \.isRefundRequest) else { continue }
            let without = tl.filter { !$0.isRefundRequest }
            for e in tl {
                for t in [e.time - 1, e.time, e.time + Self.hour] {
                    let a = SubscriptionState.fold(tl[...], at: t, catalog: p.catalog)
                    let b = SubscriptionState.fold(without[...], at: t, catalog: p.catalog)
                    #expect(a == b, "subscriber \(i) at \(SimTime.format(t))")
                    checked += 1
                }
            }
        }
        #expect(checked > 1000)
    }

    /// Rates on 10,000 subscribers, seed 1 (printed for docs/simulator.md), and the shape of
    /// every request: after its charge, decided 14–60 h later by the refund or decline at exactly
    /// its decision time, for the transaction the decision is about.
    @Test("requests precede the configured share of refunds; declined requests come at the configured rate per paid period")
    func rates() {
        let p = Self.population(1, 10_000)
        var refunds = 0, asked = 0, paidPeriods = 0, declined = 0, reasons: [ConsumptionRequestReason: Int] = [:]
        for i in 0..<p.count {
            let tl = Array(p.timeline(i))
            let requests = Population.refundRequests(in: tl, subscriber: i)
            for r in requests {
                reasons[r.reason, default: 0] += 1
                let charge = tl[..<r.eventIndex].last(where: \.createsTransaction)!
                #expect(r.time > charge.time, "a request after its charge")
                #expect((14 * Self.hour...60 * Self.hour).contains(r.decisionTime - r.time))
                let d = try! #require(r.decisionIndex, "subscriber \(i): a decision at \(SimTime.format(r.decisionTime))")
                let stateAtDecision = SubscriptionState.fold(tl[..<d], at: r.decisionTime, catalog: p.catalog)
                #expect(stateAtDecision.latest.index == r.transactionIndex && stateAtDecision.status == 1)
                if tl[d].kind == .refund {
                    asked += 1
                    #expect((tl[d].a == 1) == (r.reason == .fulfillmentIssue))
                } else {
                    declined += 1
                }
            }
            refunds += tl.filter { $0.kind == .refund }.count
            if !p.records[i].flags.contains(.familyShared) {
                paidPeriods += tl.filter { $0.createsTransaction && SimOffer(rawValue: $0.b) != .freeTrial }.count
            }
        }
        let share = Double(asked) / Double(refunds), rate = Double(declined) / Double(paidPeriods)
        print(String(format: "refund requests in 10,000 subscribers, seed 1: %d of %d refunds asked first (%.1f%%); %d declined requests in %d paid periods (%.2f%%); reasons %@",
                     asked, refunds, share * 100, declined, paidPeriods, rate * 100, "\(reasons.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.apple) \($0.value)" })"))
        #expect((0.52...0.68).contains(share), "share of refunds with a request \(share)")
        #expect((0.0025...0.0055).contains(rate), "declined requests per paid period \(rate)")
        #expect(ConsumptionRequestReason.allCases.allSatisfy { (reasons[$0] ?? 0) > 0 })
    }
}
