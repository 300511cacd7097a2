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
        let family = flags.contains(.familyShared)
        let events = timeline(&rng, group: group, family: family)
        return (record, RefundRequestGenerator(generator: self).add(to: events, subscriber: i, family: family))
    }

    /// The timeline of one subscription: period after period until the horizon (or an end),
    /// each one's events drawn and applied, then its end (TimelineBuilder).
    private func timeline(_ rng: inout SimRandom, group: Int, family: Bool) -> [TimelineEvent] {
        var builder = TimelineBuilder(self, &rng, group: group, family: family)
        while builder.ps < horizon && builder.transactions < 990 {
            let isTrial = builder.isTrial
            let candidates = builder.candidates(&rng)
            switch builder.apply(candidates) {
            case .stop: return builder.events
            case .nextPeriod: continue
            case .periodEnd: break
            }
            if builder.endPeriod(&rng, isTrial: isTrial) == .stop { return builder.events }
        }
        return builder.events
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
