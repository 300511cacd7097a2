import Foundation

/// Generates subscription timelines. Each subscription draws from its own random stream (seed,
/// index), so subscriber i is the same whatever the population size. The behaviour model and its
/// rates are documented in docs/simulator.md.
struct PopulationGenerator {
    let config: PopulationConfig
    let catalog: Catalog
    let horizon: Int64
    /// When the price-increase campaign starts to apply at renewals, and until when.
    let priceIncreaseFrom: Int64
    let priceIncreaseUntil: Int64
    /// When ``Catalog/discontinuedProduct`` stops renewing.
    let discontinuedAt: Int64

    init(config: PopulationConfig, catalog: Catalog) {
        self.config = config
        self.catalog = catalog
        horizon = config.start + Int64(config.horizonDays) * SimTime.day
        priceIncreaseFrom = config.start + 35 * SimTime.day
        priceIncreaseUntil = priceIncreaseFrom + 60 * SimTime.day
        discontinuedAt = config.start + 21 * SimTime.day
    }

    private struct Candidate {
        var time: Int64
        var event: TimelineEvent
        /// For a refund: when it is reversed (nil: never).
        var reversal: Int64?
        var order: Int
    }

    /// The record (without its event range) and the timeline of subscription `i`.
    func generate(_ i: Int) -> (SubscriberRecord, [TimelineEvent]) {
        let seed = config.seed
        var rng = SimRandom(seed, UInt64(i), 1)
        let pairIndex = i / 2
        var pairRng = SimRandom(seed, UInt64(pairIndex), 2)
        let paired = 2 * pairIndex + 1 < config.subscribers && pairRng.chance(config.bothGroupsShare)
        let customer = paired ? 2 * pairIndex : i
        var customerRng = SimRandom(seed, UInt64(customer), 3)
        var flags: SubscriberRecord.Flags = []
        if config.allSandbox || customerRng.chance(config.sandboxShare) { flags.insert(.sandbox) }
        if customerRng.chance(config.receiptShare) { flags.insert(.receipt) }
        let ids = customerRng.unit()
        if ids < 0.90 { flags.insert(.accountToken) }
        if ids < 0.75 || ids >= 0.90 { flags.insert(.customerRef) }
        let storefront = UInt8(customerRng.weighted(Storefronts.all.map(\.weight)))
        let group = paired ? i & 1 : (rng.chance(0.3) ? 1 : 0)
        if !paired && rng.chance(config.familyShare) { flags.insert(.familyShared) }

        let record = SubscriberRecord(
            firstEvent: 0, eventCount: 0, partner: paired ? Int32(i ^ 1) : -1, group: UInt8(group),
            flags: flags, storefront: storefront)
        return (record, timeline(&rng, group: group, family: flags.contains(.familyShared)))
    }

    private func timeline(_ rng: inout SimRandom, group: Int, family: Bool) -> [TimelineEvent] {
        let day = SimTime.day, hour = SimTime.hour
        let start = config.start
        let inGroup = catalog.products(inGroup: group)
        var product = inGroup[rng.weighted(inGroup.map { catalog.products[$0].weight })]
        var unit = catalog.products[product].unit

        // First purchase: weighted towards the months before the start.
        let r = rng.unit()
        var backDays: Int64 =
            r < 0.4 ? rng.int(0...59) : r < 0.75 ? rng.int(60...364) : rng.int(365...Int64(max(365, config.historyDays)))
        if unit == .week { backDays = min(backDays, 150) }
        let firstPurchase = start - backDays * day - rng.between(hour, day)

        var offer: SimOffer = .none
        let o = rng.unit()
        if o < 0.35 {
            offer = .freeTrial
        } else if o < 0.43 && unit == .month {
            offer = .introPayAsYouGo
        } else if o < 0.46 {
            offer = .offerCode
        }
        var introLeft = offer == .introPayAsYouGo ? 2 : 0
        var tier = 0
        var events: [TimelineEvent] = [
            TimelineEvent(firstPurchase, .purchase, a: UInt8(product), b: offer.rawValue, c: 0)
        ]
        var autoRenew = true
        var pendingPlan: Int?
        var priceIncrease = 0  // 0 none, 1 awaiting consent, 2 accepted
        var promoNext: SimOffer = .none
        var paidPeriods = 0
        var ps = firstPurchase
        var pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
        var transactions = 1

        periods: while ps < horizon && transactions < 990 {
            let len = pe - ps
            let isTrial = offer == .freeTrial
            var cands: [Candidate] = []
            func add(_ t: Int64, _ e: TimelineEvent, reversal: Int64? = nil) {
                cands.append(Candidate(time: t, event: e, reversal: reversal, order: cands.count))
            }
            // Refunds come in the days after a charge; some are reversed a few days later.
            if !isTrial && !family && rng.chance(0.006) {
                let t = ps + rng.between(12 * hour, min(10 * day, len * 9 / 10))
                let prorated = rng.chance(0.2)
                let reason: UInt8 = rng.chance(0.3) ? 1 : 0
                let reversal = rng.chance(0.15) ? t + rng.between(day, 7 * day) : nil
                add(t, TimelineEvent(t, .refund, a: reason, b: prorated ? 1 : 0, c: prorated ? 50 : 100), reversal: reversal)
            }
            if family && rng.chance(0.004) {
                let t = ps + rng.between(0, len * 9 / 10)
                add(t, TimelineEvent(t, .familyRevoke))
            }
            // Immediate upgrade to a higher level.
            let level = catalog.products[product].level
            if !isTrial && level > 1 && rng.chance(0.01) {
                let higher = inGroup.filter { catalog.products[$0].level < level }
                let sameUnit = higher.filter { catalog.products[$0].unit == unit }
                let pool = sameUnit.isEmpty ? higher : sameUnit
                let target = pool[Int(rng.next() % UInt64(pool.count))]
                let t = ps + rng.between(len / 10, len * 9 / 10)
                add(t, TimelineEvent(t, .upgrade, a: UInt8(target), b: 0, c: 0))
            }
            // Auto-renew off: mostly right after the charge or in the days before the period ends.
            if autoRenew {
                let p: Double
                if isTrial {
                    p = 0.28
                } else if paidPeriods == 0 {
                    p = unit == .year ? 0.22 : unit == .month ? 0.09 : 0.07
                } else {
                    p = unit == .year ? 0.15 : unit == .month ? 0.045 : 0.03
                }
                if rng.chance(p) {
                    let w = rng.unit()
                    let t: Int64
                    if w < 0.45 {
                        t = ps + rng.between(5 * SimTime.minute, min(2 * day, len / 4))
                    } else if w < 0.80 {
                        t = pe - rng.between(hour, min(5 * day, len * 3 / 10))
                    } else {
                        t = ps + rng.between(hour, len - hour)
                    }
                    add(t, TimelineEvent(t, .autoRenewOff))
                    if rng.chance(0.18) {
                        let back = rng.between(t + hour, pe - hour)
                        let promo: SimOffer = unit != .week && rng.chance(0.4) ? .promotional : .none
                        if back > t { add(back, TimelineEvent(back, .autoRenewOn, b: promo.rawValue)) }
                    }
                }
            }
            // A downgrade or crossgrade that takes effect at the next renewal; sometimes cancelled.
            if autoRenew && pendingPlan == nil && !isTrial && rng.chance(0.015) {
                let others = inGroup.filter {
                    $0 != product && $0 != catalog.discontinuedProduct && catalog.products[$0].level >= level
                }
                if !others.isEmpty {
                    let target = others[Int(rng.next() % UInt64(others.count))]
                    let t = rng.between(ps + hour, pe - 2 * hour)
                    add(t, TimelineEvent(t, .planChangeScheduled, a: UInt8(target)))
                    if rng.chance(0.25) {
                        let c = rng.between(t + hour, pe - hour)
                        add(c, TimelineEvent(c, .planChangeCancelled))
                    }
                }
            }
            // The price-increase campaign reaches renewals between its two dates.
            if catalog.priceIncreaseProducts.contains(product) && tier == 0 && priceIncrease == 0
                && pe >= priceIncreaseFrom && pe < priceIncreaseUntil
            {
                let t = max(ps + hour, pe - 27 * day)
                let consent = rng.chance(0.85)
                add(t, TimelineEvent(t, .priceIncreaseNotified, a: consent ? 1 : 0))
                if consent && rng.chance(0.65) {
                    let a = rng.between(t + hour, pe - hour)
                    add(a, TimelineEvent(a, .priceIncreaseAccepted))
                }
            }

            cands.sort { ($0.time, $0.order) < ($1.time, $1.order) }
            var skipUntil = Int64.min
            for c in cands where c.time >= skipUntil {
                switch c.event.kind {
                case .refund:
                    events.append(c.event)
                    guard let rev = c.reversal, rev < pe - hour else { break periods }
                    events.append(TimelineEvent(rev, .refundReversed))
                    skipUntil = rev
                case .familyRevoke:
                    events.append(c.event)
                    break periods
                case .upgrade:
                    events.append(c.event)
                    transactions += 1
                    product = Int(c.event.a)
                    unit = catalog.products[product].unit
                    offer = .none
                    autoRenew = true
                    pendingPlan = nil
                    priceIncrease = 0
                    promoNext = .none
                    introLeft = 0
                    tier = 0
                    paidPeriods += 1
                    ps = c.time
                    pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
                    continue periods
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

            // The end of the period.
            if pe >= horizon { break }
            var expiredAt: Int64
            var intent: UInt8
            let nextProduct = pendingPlan ?? product
            if !autoRenew {
                intent = rng.chance(0.03) ? 5 : 1
                expiredAt = pe
            } else if nextProduct == catalog.discontinuedProduct && pe >= discontinuedAt {
                intent = 4
                expiredAt = pe
            } else if priceIncrease == 1 {
                intent = 3
                expiredAt = pe
            } else if rng.chance(isTrial ? 0.09 : 0.05) {
                let nextUnit = catalog.products[nextProduct].unit
                var grace: Int64 = 0
                if rng.chance(config.graceShare) {
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
                if recovers {
                    if recoverAt >= horizon { break }
                    tier += priceIncrease == 2 ? 1 : 0
                    priceIncrease = 0
                    product = nextProduct
                    unit = catalog.products[product].unit
                    pendingPlan = nil
                    offer = promoNext != .none ? promoNext : (introLeft > 0 ? .introPayAsYouGo : .none)
                    if introLeft > 0 && promoNext == .none { introLeft -= 1 }
                    promoNext = .none
                    events.append(TimelineEvent(recoverAt, .recovery, a: UInt8(product), b: offer.rawValue, c: UInt8(tier)))
                    transactions += 1
                    paidPeriods += 1
                    ps = recoverAt
                    pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
                    continue periods
                }
                intent = 2
                expiredAt = pe + 60 * day
                if expiredAt >= horizon { break }
            } else {
                tier += priceIncrease == 2 ? 1 : 0
                priceIncrease = 0
                product = nextProduct
                unit = catalog.products[product].unit
                pendingPlan = nil
                offer = promoNext != .none ? promoNext : (introLeft > 0 ? .introPayAsYouGo : .none)
                if introLeft > 0 && promoNext == .none { introLeft -= 1 }
                promoNext = .none
                events.append(TimelineEvent(pe, .renewal, a: UInt8(product), b: offer.rawValue, c: UInt8(tier)))
                transactions += 1
                paidPeriods += 1
                ps = pe
                pe = SimSchedule.expires(purchase: ps, unit: unit, offer: offer)
                continue periods
            }

            events.append(TimelineEvent(expiredAt, .expire, a: intent))
            autoRenew = false
            priceIncrease = 0
            pendingPlan = nil
            promoNext = .none
            introLeft = 0
            // Some come back, within the group, on the same originalTransactionId.
            let comeBack: Double = [0, 0.12, 0.15, 0.10, 0.30, 0.05][Int(intent)]
            guard rng.chance(comeBack) else { break }
            let gap = rng.between(day, 150 * day)
            let t = expiredAt + gap
            if t >= horizon { break }
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
        }
        return events
    }
}

/// Period arithmetic shared by generation and the state fold.
public enum SimSchedule {
    /// When a transaction bought at `purchase` expires: a free trial lasts 3 days (weekly),
    /// a week (monthly) or a month (yearly); otherwise one period of the product.
    public static func expires(purchase: Int64, unit: Catalog.Unit, offer: SimOffer) -> Int64 {
        if offer == .freeTrial {
            switch unit {
            case .week: return purchase + 3 * SimTime.day
            case .month: return purchase + 7 * SimTime.day
            case .year: return SimTime.addMonths(purchase, 1)
            }
        }
        switch unit {
        case .week: return purchase + 7 * SimTime.day
        case .month: return SimTime.addMonths(purchase, 1)
        case .year: return SimTime.addMonths(purchase, 12)
        }
    }

    /// `offerPeriod` of a transaction's offer.
    public static func offerPeriod(unit: Catalog.Unit, offer: SimOffer) -> String? {
        switch offer {
        case .none: return nil
        case .freeTrial:
            switch unit {
            case .week: return "P3D"
            case .month: return "P1W"
            case .year: return "P1M"
            }
        case .introPayAsYouGo: return "P3M"
        case .promotional, .winBack, .offerCode: return unit.isoPeriod
        }
    }

    /// Price paid for a transaction with an offer, in milliunits.
    public static func price(full: Int64, offer: SimOffer) -> Int64 {
        switch offer {
        case .freeTrial: return 0
        case .introPayAsYouGo, .promotional, .winBack: return (full / 2 + 5) / 10 * 10
        case .offerCode: return (full * 7 / 10 + 5) / 10 * 10
        case .none: return full
        }
    }
}
