import Foundation

/// One subscription's timeline while ``PopulationGenerator`` writes it: what the behaviour model
/// (docs/simulator.md) carries from one period to the next. Each step draws from the
/// subscription's random stream in a fixed order, so a seed always gives the same timeline.
struct TimelineBuilder {
    /// What comes after a step.
    enum Next {
        /// The timeline ends here.
        case stop
        /// A new period started (a renewal, recovery, upgrade or resubscription).
        case nextPeriod
        /// The period runs to its end.
        case periodEnd
    }

    /// An event drawn for the current period, applied in time order.
    struct Candidate {
        var time: Int64
        var event: TimelineEvent
        /// For a refund: when it is reversed (nil: never).
        var reversal: Int64?
        var order: Int
    }

    let generator: PopulationGenerator
    let inGroup: [Int]
    let family: Bool
    private(set) var events: [TimelineEvent] = []
    private(set) var product: Int
    private var unit: Catalog.Unit
    private var offer: SimOffer = .none
    private var introLeft = 0
    private var tier = 0
    private var autoRenew = true
    private var pendingPlan: Int?
    private var priceIncrease = 0  // 0 none, 1 awaiting consent, 2 accepted
    private var promoNext: SimOffer = .none
    private var paidPeriods = 0
    /// The current period: its start and end.
    private(set) var ps: Int64 = 0
    private(set) var pe: Int64 = 0
    private(set) var transactions = 1

    private var catalog: Catalog { generator.catalog }
    private var day: Int64 { SimTime.day }
    private var hour: Int64 { SimTime.hour }

    /// The first purchase: a product of `group`, weighted towards the months before the start,
    /// sometimes with an offer.
    init(_ generator: PopulationGenerator, _ rng: inout SimRandom, group: Int, family: Bool) {
        self.generator = generator
        self.family = family
        let catalog = generator.catalog, config = generator.config
        inGroup = catalog.products(inGroup: group)
        product = inGroup[rng.weighted(inGroup.map { catalog.products[$0].weight })]
        unit = catalog.products[product].unit

        let r = rng.unit()
        var backDays: Int64 =
            r < 0.4 ? rng.int(0...59) : r < 0.75 ? rng.int(60...364) : rng.int(365...Int64(max(365, config.historyDays)))
        if unit == .week { backDays = min(backDays, 150) }
        let firstPurchase = config.start - backDays * SimTime.day - rng.between(SimTime.hour, SimTime.day)

        let o = rng.unit()
        if o < 0.35 {
            offer = .freeTrial
        } else if o < 0.43 && unit == .month {
            offer = .introPayAsYouGo
        } else if o < 0.46 {
            offer = .offerCode
        }
        introLeft = offer == .introPayAsYouGo ? 2 : 0
        events = [TimelineEvent(firstPurchase, .purchase, a: UInt8(product), b: offer.rawValue, c: 0)]
        ps = firstPurchase
        pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
    }

    /// True while the current period is a free trial.
    var isTrial: Bool { offer == .freeTrial }

    // MARK: Events within a period

    /// Every event drawn for the current period, in time order (ties in drawing order).
    func candidates(_ rng: inout SimRandom) -> [Candidate] {
        var cands: [Candidate] = []
        func add(_ t: Int64, _ e: TimelineEvent, reversal: Int64? = nil) {
            cands.append(Candidate(time: t, event: e, reversal: reversal, order: cands.count))
        }
        drawRevocation(&rng, add)
        drawUpgrade(&rng, add)
        drawAutoRenewChanges(&rng, add)
        drawPlanChange(&rng, add)
        drawPriceIncrease(&rng, add)
        cands.sort { ($0.time, $0.order) < ($1.time, $1.order) }
        return cands
    }

    typealias Add = (Int64, TimelineEvent, Int64?) -> Void

    /// Refunds come in the days after a charge; some are reversed a few days later. A family
    /// member's access can end at any time.
    private func drawRevocation(_ rng: inout SimRandom, _ add: Add) {
        let len = pe - ps
        if !isTrial && !family && rng.chance(0.006) {
            let t = ps + rng.between(12 * hour, min(10 * day, len * 9 / 10))
            let prorated = rng.chance(0.2)
            let reason: UInt8 = rng.chance(0.3) ? 1 : 0
            let reversal = rng.chance(0.15) ? t + rng.between(day, 7 * day) : nil
            add(t, TimelineEvent(t, .refund, a: reason, b: prorated ? 1 : 0, c: prorated ? 50 : 100), reversal)
        }
        if family && rng.chance(0.004) {
            let t = ps + rng.between(0, len * 9 / 10)
            add(t, TimelineEvent(t, .familyRevoke), nil)
        }
    }

    /// Immediate upgrade to a higher level.
    private func drawUpgrade(_ rng: inout SimRandom, _ add: Add) {
        let len = pe - ps
        let level = catalog.products[product].level
        guard !isTrial && level > 1 && rng.chance(0.01) else { return }
        let higher = inGroup.filter { catalog.products[$0].level < level }
        let sameUnit = higher.filter { catalog.products[$0].unit == unit }
        let pool = sameUnit.isEmpty ? higher : sameUnit
        let target = pool[Int(rng.next() % UInt64(pool.count))]
        let t = ps + rng.between(len / 10, len * 9 / 10)
        add(t, TimelineEvent(t, .upgrade, a: UInt8(target), b: 0, c: 0), nil)
    }

    /// Auto-renew off: mostly right after the charge or in the days before the period ends;
    /// sometimes back on later, with a promotional offer.
    private func drawAutoRenewChanges(_ rng: inout SimRandom, _ add: Add) {
        guard autoRenew else { return }
        let len = pe - ps
        let p: Double
        if isTrial {
            p = 0.28
        } else if paidPeriods == 0 {
            p = unit == .year ? 0.22 : unit == .month ? 0.09 : 0.07
        } else {
            p = unit == .year ? 0.15 : unit == .month ? 0.045 : 0.03
        }
        guard rng.chance(p) else { return }
        let w = rng.unit()
        let t: Int64
        if w < 0.45 {
            t = ps + rng.between(5 * SimTime.minute, min(2 * day, len / 4))
        } else if w < 0.80 {
            t = pe - rng.between(hour, min(5 * day, len * 3 / 10))
        } else {
            t = ps + rng.between(hour, len - hour)
        }
        add(t, TimelineEvent(t, .autoRenewOff), nil)
        if rng.chance(0.18) {
            let back = rng.between(t + hour, pe - hour)
            let promo: SimOffer = unit != .week && rng.chance(0.4) ? .promotional : .none
            if back > t { add(back, TimelineEvent(back, .autoRenewOn, b: promo.rawValue), nil) }
        }
    }

    /// A downgrade or crossgrade that takes effect at the next renewal; sometimes cancelled.
    private func drawPlanChange(_ rng: inout SimRandom, _ add: Add) {
        guard autoRenew && pendingPlan == nil && !isTrial && rng.chance(0.015) else { return }
        let level = catalog.products[product].level
        let others = inGroup.filter {
            $0 != product && $0 != catalog.discontinuedProduct && catalog.products[$0].level >= level
        }
        guard !others.isEmpty else { return }
        let target = others[Int(rng.next() % UInt64(others.count))]
        let t = rng.between(ps + hour, pe - 2 * hour)
        add(t, TimelineEvent(t, .planChangeScheduled, a: UInt8(target)), nil)
        if rng.chance(0.25) {
            let c = rng.between(t + hour, pe - hour)
            add(c, TimelineEvent(c, .planChangeCancelled), nil)
        }
    }

    /// The price-increase campaign reaches renewals between its two dates.
    private func drawPriceIncrease(_ rng: inout SimRandom, _ add: Add) {
        guard catalog.priceIncreaseProducts.contains(product) && tier == 0 && priceIncrease == 0
            && pe >= generator.priceIncreaseFrom && pe < generator.priceIncreaseUntil
        else { return }
        let t = max(ps + hour, pe - 27 * day)
        let consent = rng.chance(0.85)
        add(t, TimelineEvent(t, .priceIncreaseNotified, a: consent ? 1 : 0), nil)
        if consent && rng.chance(0.65) {
            let a = rng.between(t + hour, pe - hour)
            add(a, TimelineEvent(a, .priceIncreaseAccepted), nil)
        }
    }
}

// MARK: - Applying a period's events, and its end

extension TimelineBuilder {
    /// Applies the period's events in order: a refund or family revoke ends the timeline (unless
    /// reversed), an upgrade starts a new period at once.
    mutating func apply(_ cands: [Candidate]) -> Next {
        var skipUntil = Int64.min
        for c in cands where c.time >= skipUntil {
            switch c.event.kind {
            case .refund:
                events.append(c.event)
                guard let rev = c.reversal, rev < pe - hour else { return .stop }
                events.append(TimelineEvent(rev, .refundReversed))
                skipUntil = rev
            case .familyRevoke:
                events.append(c.event)
                return .stop
            case .upgrade:
                events.append(c.event)
                upgrade(to: Int(c.event.a), at: c.time)
                return .nextPeriod
            case .autoRenewOff:
                autoRenew = false
                events.append(c.event)
            case .autoRenewOn:
                autoRenew = true
                promoNext = SimOffer(rawValue: c.event.b) ?? .none
                events.append(c.event)
            case .planChangeScheduled:
                pendingPlan = Int(c.event.a)
                events.append(c.event)
            case .planChangeCancelled:
                pendingPlan = nil
                events.append(c.event)
            case .priceIncreaseNotified:
                priceIncrease = c.event.a == 1 ? 1 : 2
                events.append(c.event)
            case .priceIncreaseAccepted:
                priceIncrease = 2
                events.append(c.event)
            default:
                events.append(c.event)
            }
        }
        return .periodEnd
    }

    /// An immediate upgrade: a new transaction and period now, every pending choice reset.
    private mutating func upgrade(to target: Int, at t: Int64) {
        transactions += 1
        product = target
        unit = catalog.products[product].unit
        offer = .none
        autoRenew = true
        pendingPlan = nil
        priceIncrease = 0
        promoNext = .none
        introLeft = 0
        tier = 0
        paidPeriods += 1
        ps = t
        pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
    }

    /// The end of the period: it renews, its charge fails, or it expires (with the intent).
    /// `isTrial` is whether the period began as a free trial.
    mutating func endPeriod(_ rng: inout SimRandom, isTrial: Bool) -> Next {
        if pe >= generator.horizon { return .stop }
        let expiredAt: Int64
        let intent: UInt8
        let nextProduct = pendingPlan ?? product
        if !autoRenew {
            intent = rng.chance(0.03) ? 5 : 1
            expiredAt = pe
        } else if nextProduct == catalog.discontinuedProduct && pe >= generator.discontinuedAt {
            intent = 4
            expiredAt = pe
        } else if priceIncrease == 1 {
            intent = 3
            expiredAt = pe
        } else if rng.chance(isTrial ? 0.09 : 0.05) {
            let billing = billingFailure(&rng, nextProduct: nextProduct)
            guard billing == .periodEnd else { return billing }
            intent = 2
            expiredAt = pe + 60 * day
            if expiredAt >= generator.horizon { return .stop }
        } else {
            renew(into: nextProduct, at: pe, .renewal)
            return .nextPeriod
        }
        return expire(&rng, intent: intent, at: expiredAt)
    }

    /// The renewal charge failed: billing retry, with a grace period for some, then a recovery
    /// (a new period) or, when it never recovers, `periodEnd` (expiry after 60 days).
    private mutating func billingFailure(_ rng: inout SimRandom, nextProduct: Int) -> Next {
        let nextUnit = catalog.products[nextProduct].unit
        var grace: Int64 = 0
        if rng.chance(generator.config.graceShare) {
            switch nextUnit {
            case .week: grace = 3
            case .month: grace = rng.chance(0.5) ? 3 : 16
            case .year: grace = [3, 16, 28][Int(rng.next() % 3)]
            }
        }
        events.append(TimelineEvent(pe, .billingFailure, d: UInt32(grace)))
        let recovers = rng.chance(0.65)
        let recoverAt: Int64
        if rng.chance(0.75) {
            // Most recoveries come in the first days: an exponential with a 2-day mean.
            let u = max(rng.unit(), 1e-9)
            recoverAt = pe + min(Int64(-2.0 * Double(day) * log(u)), 7 * day - hour) + SimTime.minute
        } else {
            recoverAt = pe + rng.between(7 * day, 60 * day - hour)
        }
        if grace > 0 && (!recovers || recoverAt > pe + grace * day) {
            events.append(TimelineEvent(pe + grace * day, .graceExpired))
        }
        guard recovers else { return .periodEnd }
        if recoverAt >= generator.horizon { return .stop }
        renew(into: nextProduct, at: recoverAt, .recovery)
        return .nextPeriod
    }

    /// A renewal or a recovery at `t`: into the pending plan, with the next offer (a promotional
    /// one, else what is left of an introductory one), a price tier up after an accepted increase.
    private mutating func renew(into nextProduct: Int, at t: Int64, _ kind: TimelineEvent.Kind) {
        tier += priceIncrease == 2 ? 1 : 0
        priceIncrease = 0
        product = nextProduct
        unit = catalog.products[product].unit
        pendingPlan = nil
        offer = promoNext != .none ? promoNext : (introLeft > 0 ? .introPayAsYouGo : .none)
        if introLeft > 0 && promoNext == .none { introLeft -= 1 }
        promoNext = .none
        events.append(TimelineEvent(t, kind, a: UInt8(product), b: offer.rawValue, c: UInt8(tier)))
        transactions += 1
        paidPeriods += 1
        ps = t
        pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
    }

    /// Expiry with `intent`; some come back, within the group, on the same
    /// originalTransactionId (a new period), the others end the timeline.
    private mutating func expire(_ rng: inout SimRandom, intent: UInt8, at expiredAt: Int64) -> Next {
        events.append(TimelineEvent(expiredAt, .expire, a: intent))
        autoRenew = false
        priceIncrease = 0
        pendingPlan = nil
        promoNext = .none
        introLeft = 0
        let comeBack: Double = [0, 0.12, 0.15, 0.10, 0.30, 0.05][Int(intent)]
        guard rng.chance(comeBack) else { return .stop }
        let gap = rng.between(day, 150 * day)
        let t = expiredAt + gap
        if t >= generator.horizon { return .stop }
        if product == catalog.discontinuedProduct || intent == 4 {
            let others = inGroup.filter { $0 != catalog.discontinuedProduct }
            product = others[Int(rng.next() % UInt64(others.count))]
            unit = catalog.products[product].unit
        }
        offer = intent == 1 && gap >= 7 * day && rng.chance(0.4) ? .winBack : .none
        autoRenew = true
        events.append(TimelineEvent(t, .resubscribe, a: UInt8(product), b: offer.rawValue, c: UInt8(tier)))
        transactions += 1
        paidPeriods += 1
        ps = t
        pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
        return .nextPeriod
    }
}
