import Foundation
import Testing
@testable import ChurnModel

/// A seeded generator (SplitMix64): the same seed, the same histories and orders.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random subscription histories: what Apple says after each change (auto-renew flips, renewals,
/// billing retry and grace, recoveries, expiries, resubscribes, price increases, refunds, plan
/// changes) and polls that see the same state again, on three-day periods so a week holds several.
enum Histories {
    static func make(_ rng: inout SplitMix, length: Int) -> [Observation] {
        var apple = Apple(purchase: day(-1), expires: day(2))
        var at = day(0)
        var period = 1
        var out: [Observation] = []
        for _ in 0..<length {
            at = at.addingTimeInterval(Double(Int.random(in: 600...60_000, using: &rng)))
            var named: ChurnEventType?
            let periodEnd = apple.transaction.expiresDate ?? at
            let churned = apple.status == 2 || apple.status == 5
            switch Int.random(in: 0..<11, using: &rng) {
            case 0: apple = apple.autoRenew(false); named = .autoRenewDisabled
            case 1: apple = apple.autoRenew(true); named = .autoRenewEnabled
            case 2 where !churned:
                period += 1
                let trouble = apple.status == 3 || apple.status == 4
                apple = apple.newPeriod(period, at: max(at.addingTimeInterval(-3600), periodEnd), days: 3)
                named = trouble ? .billingRecovered : .renewed
            case 3 where !churned: apple = apple.billingFailed(grace: Bool.random(using: &rng) ? periodEnd.addingTimeInterval(86_400) : nil)
            case 4: apple = apple.expired(intent: Int.random(in: 1...2, using: &rng))
            case 5 where churned:
                period += 1
                apple = apple.newPeriod(period, at: at.addingTimeInterval(-60), days: 3, reason: "PURCHASE")
                named = .resubscribed
            case 6: apple = apple.with { $0.renewal?.priceIncreaseStatus = 0 }; named = .priceIncreasePending
            case 7: apple = apple.with { $0.renewal?.priceIncreaseStatus = 1 }; named = .priceIncreaseAccepted
            case 8: apple = apple.revoked(at: at.addingTimeInterval(-120))
            case 9: apple = apple.with { $0.renewal?.autoRenewProductId = "lite.monthly" }; named = .planChangeScheduled
            default: break // a poll, or a notification that changes nothing
            }
            out.append(Observation(snapshot: apple.snapshot(at: at), asOf: at, named: named))
        }
        return out
    }
}

/// The log as PostgreSQL keeps it, simulated: rows are never deleted; a row is live until
/// superseded; an event is inserted unless a live row has its key.
struct SimulatedLog {
    var current: Observation?
    var kept: [Observation] = []
    var rows: [(key: ObservationSequence.Key, live: Bool)] = []
    var stale = 0

    var live: Set<ObservationSequence.Key> { Set(rows.filter(\.live).map(\.key)) }

    mutating func insert(_ events: [ChurnEvent]) {
        for key in events.map(ObservationSequence.Key.init) where !rows.contains(where: { $0.live && $0.key == key }) {
            rows.append((key, true))
        }
    }

    /// As the feed and the polls apply an observation (one delivered again is known by its
    /// notification UUID and skipped before this).
    mutating func apply(_ o: Observation, prunedBefore: Date? = nil) {
        guard let c = current else { current = o; return }
        guard o != c, !kept.contains(o) else { return }
        if o.signedDate >= c.signedDate {
            insert(ObservationSequence.events(between: c, and: o, establishedAt: nil))
            kept.append(c)
            current = o
            return
        }
        guard let p = ObservationSequence.place(o, current: c, kept: kept, establishedAt: nil, prunedBefore: prunedBefore) else { stale += 1; return }
        let gone = Set(p.supersede.map(ObservationSequence.Key.init))
        for i in rows.indices where rows[i].live && gone.contains(rows[i].key) { rows[i].live = false }
        insert(p.log)
        kept.append(o)
    }
}

@Suite("the event log is a function of the observations, not of their order")
struct ObservationOrderTests {
    static func inOrder(_ history: [Observation]) -> Set<ObservationSequence.Key> {
        var log = SimulatedLog()
        for o in history.sorted(by: { $0.signedDate < $1.signedDate }) { log.apply(o) }
        return log.live
    }

    @Test("4,000 random histories, each in 6 random orders and newest first: the same live events as in signedDate order, none stale")
    func anyOrderSameLog() {
        var rng = SplitMix(47)
        var mismatches: [String] = []
        var orders = 0, withEvents = 0, superseded = 0
        for h in 0..<4_000 {
            let history = Histories.make(&rng, length: Int.random(in: 2...9, using: &rng))
            let expected = Self.inOrder(history)
            if !expected.isEmpty { withEvents += 1 }
            var permutations = (0..<6).map { _ in history.shuffled(using: &rng) }
            permutations.append(history.sorted { $0.signedDate > $1.signedDate })
            for order in permutations {
                orders += 1
                var log = SimulatedLog()
                for o in order { log.apply(o) }
                superseded += log.rows.filter { !$0.live }.count
                if log.live != expected || log.stale > 0 {
                    mismatches.append("history \(h): \(log.stale) stale, missing \(expected.subtracting(log.live).map { "\($0.type)" }), extra \(log.live.subtracting(expected).map { "\($0.type)" })")
                }
            }
        }
        print("observation order: \(orders) orders of 4,000 histories (\(withEvents) with events), \(superseded) events superseded on the way")
        #expect(mismatches.isEmpty, "\(mismatches.count) orders differ: \(mismatches.prefix(5))")
        #expect(withEvents > 3_000 && superseded > 1_000, "the histories exercise the rule: \(withEvents) with events, \(superseded) superseded")
    }

    @Test("the same observations delivered twice, in any order: nothing changes the second time")
    func duplicatesChangeNothing() {
        var rng = SplitMix(7)
        for _ in 0..<500 {
            let history = Histories.make(&rng, length: 6)
            var log = SimulatedLog()
            for o in history.shuffled(using: &rng) { log.apply(o) }
            let once = log.live
            for o in history.shuffled(using: &rng) { log.apply(o) }
            #expect(log.live == once)
        }
    }

    @Test("a late observation before every kept one is placed first, unless its predecessor may have been pruned; the same moment again is nothing")
    func pruned() {
        let a = Apple(purchase: day(-1), expires: day(30))
        let first = Observation(snapshot: a.snapshot(at: day(0)), asOf: day(0))
        let off = Observation(snapshot: a.autoRenew(false).snapshot(at: day(1)), asOf: day(1), named: .autoRenewDisabled)
        let current = Observation(snapshot: a.autoRenew(false).snapshot(at: day(2)), asOf: day(2))
        // `first` pruned (observations whose successor was signed before day 1.5 are gone): `off`
        // cannot be placed; nothing ever pruned, it is the first (nothing logged before it).
        #expect(ObservationSequence.place(off, current: current, kept: [], establishedAt: nil, prunedBefore: day(1.5)) == nil)
        #expect(ObservationSequence.place(off, current: current, kept: [], establishedAt: nil, prunedBefore: nil)?.log == [])
        let placed = ObservationSequence.place(off, current: current, kept: [first], establishedAt: nil, prunedBefore: day(1.5))
        #expect(placed?.log.map(\.type) == [.autoRenewDisabled] && placed?.log.first?.occurredAt == day(1))
        // Logged as seen from the wrong neighbour (at day 2), it is superseded by the right one.
        #expect(placed?.supersede.map(\.type) == [.autoRenewDisabled] && placed?.supersede.first?.occurredAt == day(2))
        #expect(placed?.next == day(2))
        // The same moment again is that moment's observation: nothing to place.
        #expect(ObservationSequence.place(first, current: current, kept: [first], establishedAt: nil, prunedBefore: nil) == nil)
        // Before the first sync's moment, nothing is an event.
        #expect(ObservationSequence.place(off, current: current, kept: [first], establishedAt: day(2), prunedBefore: nil)?.log == [])
    }

    @Test("the issue's subscription: grace arrives first, then the recovery, then the purchase: grace_period_started is logged at its own moment")
    func graceArrivesFirst() {
        let bought = Apple(purchase: day(-7), expires: day(0))
        let subscribed = Observation(snapshot: bought.snapshot(at: day(-7)), asOf: day(-7), named: nil)
        let grace = Observation(snapshot: bought.billingFailed(grace: day(6)).snapshot(at: day(0)), asOf: day(0))
        let recovered = Observation(snapshot: bought.billingFailed(grace: day(6)).newPeriod(2, at: day(1), days: 30).snapshot(at: day(1)),
                                    asOf: day(1), named: .billingRecovered)
        var log = SimulatedLog()
        for o in [grace, recovered, subscribed] { log.apply(o) }
        let types = Set(log.live.map(\.type))
        #expect(types == [.gracePeriodStarted, .billingRecovered], "\(log.live)")
        #expect(log.live == ObservationOrderTests.inOrder([subscribed, grace, recovered]))
    }
}
