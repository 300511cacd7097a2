/// Redeemed save offers: what the app reports when a customer redeems a signed promotional offer
/// that a messaging system delivered. With probability `effect` (the offer's own, when it has
/// one; drawn once per subscription from the seed, the same draw for every offer) a customer who
/// had turned auto-renew off is saved: auto-renew turns back on at the
/// redemption with the promotional offer pending, and the subscription renews every period from
/// then on (the first renewal at the offer). The timeline is replaced from the redemption on, so
/// state, history, notifications and ground truth all follow from the same events.
public struct OfferRedemption: Sendable, Hashable {
    public var subscriber: Int
    public var at: Int64
    /// Auto-renew was off with the period still running at `at` (the only customers an offer can save).
    public var eligible: Bool
    /// The offer changed the timeline.
    public var saved: Bool
    /// Without the offer the subscription would have been active at the end of the period it was
    /// in at `at` (the customer turned auto-renew back on by themselves, or moved plans).
    public var wouldHaveStayed: Bool
    /// The redeemed offer's identifier (`offer_id`), when the app named it.
    public var offerId: String? = nil
    /// Per offer with an effect of its own (`--offer-effect-by`): whether this redemption would
    /// have saved the customer with that offer (the same draw; false when not eligible or already saved).
    public var savedIf: [String: Bool] = [:]
    /// The offer made the difference: saved, and would not have stayed otherwise.
    public var changedOutcome: Bool { saved && !wouldHaveStayed }

    /// `OFFER_A=0.2,OFFER_B=0.35` (`--offer-effect-by`): a probability from 0 to 1 per offer identifier.
    public static func parseEffects(_ text: String) throws(CancelPageConfigError) -> [String: Double] {
        var out: [String: Double] = [:]
        for (id, value) in try CancelPageEffect.items(text) {
            guard let p = Double(value), (0...1).contains(p) else {
                throw CancelPageConfigError(reason: "\(id)=\(value): wants OFFER_ID=P with P from 0 to 1")
            }
            guard out[id] == nil else { throw CancelPageConfigError(reason: "\(id): listed twice") }
            out[id] = p
        }
        return out
    }
}

/// The mutable part of a ``Population``: revised timelines, every redemption in order, the
/// subscriptions an offer saved, and the answers to refund requests.
struct TimelineRevisions: Sendable {
    var timelines: [Int: [TimelineEvent]] = [:]
    var redemptions: [OfferRedemption] = []
    var savedByOffer: Set<Int> = []
    var consumption = ConsumptionLedger()
}

extension Population {
    /// Records that subscription `i`'s customer redeemed a save offer at `at` and, if the offer
    /// saves them (see ``OfferRedemption``), replaces the timeline from `at` on (refund requests
    /// and decisions after `at` go with it). A subscription already saved keeps its timeline
    /// (one save per subscription). `effectByOffer`: the probabilities of offers with an effect
    /// of their own; `offerId`'s is used when listed, else `effect`.
    public func redeemOffer(
        _ i: Int, at: Int64, effect: Double, offerId: String? = nil, effectByOffer: [String: Double] = [:]
    ) -> OfferRedemption {
        revisions.withLock { rev in
            let current = rev.timelines[i].map { $0[...] } ?? generatedTimeline(i)
            let s = SubscriptionState.fold(current, at: at, catalog: catalog)
            let periodEnd = s.latest.expiresDate
            let eligible = s.exists && s.status == 1 && !s.autoRenew && periodEnd > at
            let original = SubscriptionState.fold(generatedTimeline(i), at: periodEnd, catalog: catalog)
            let wouldHaveStayed = eligible && original.status != 2 && original.status != 5
            var random = SimRandom(config.seed, UInt64(i), 41)
            let draw = random.unit()
            let savable = eligible && !rev.savedByOffer.contains(i)
            let saved = savable && draw < (offerId.flatMap { effectByOffer[$0] } ?? effect)
            if saved {
                rev.timelines[i] = savedTimeline(current, state: s, at: at)
                rev.savedByOffer.insert(i)
                // Answers to refund requests from now on work on the saved timeline.
                rev.consumption.originals = rev.consumption.originals.filter { $0.key.subscriber != i }
            }
            let r = OfferRedemption(
                subscriber: i, at: at, eligible: eligible, saved: saved, wouldHaveStayed: wouldHaveStayed, offerId: offerId,
                savedIf: effectByOffer.mapValues { savable && draw < $0 })
            rev.redemptions.append(r)
            return r
        }
    }

    /// Every redemption so far, in the order they were reported.
    public var offerRedemptions: [OfferRedemption] { revisions.withLock { $0.redemptions } }

    /// The timeline as generated, ignoring redemptions.
    func generatedTimeline(_ i: Int) -> ArraySlice<TimelineEvent> {
        let r = records[i]
        return events[Int(r.firstEvent)..<Int(r.firstEvent + r.eventCount)]
    }

    /// `timeline` up to `at`, then auto-renew on with the promotional offer pending, then a
    /// renewal at every period end until the generation horizon.
    private func savedTimeline(_ timeline: ArraySlice<TimelineEvent>, state s: SubscriptionState, at: Int64) -> [TimelineEvent] {
        var out = Array(timeline.prefix { $0.time <= at })
        out.append(TimelineEvent(at, .autoRenewOn, b: SimOffer.promotional.rawValue))
        let horizon = config.start + Int64(config.horizonDays) * SimTime.day
        let product = s.autoRenewProduct
        let unit = catalog.products[product].unit
        var offer = SimOffer.promotional
        var renewAt = s.latest.expiresDate
        while renewAt < horizon {
            out.append(TimelineEvent(renewAt, .renewal, a: UInt8(product), b: offer.rawValue, c: UInt8(s.latest.priceTier)))
            renewAt = SimSchedule.expires(purchase: renewAt, unit: unit, offer: offer)
            offer = .none
        }
        return out
    }
}
