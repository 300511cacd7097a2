/// What a cancel-page answer does to a customer who came to cancel and stays.
struct CancelPageSave: Sendable, Hashable {
    /// The product the subscription renews into (a switch-plan answer, or a promotional offer
    /// of another product of the group); nil: the one it would have renewed into.
    var switchTo: Int?
    /// The next renewal is at the promotional offer.
    var promotional: Bool
    /// The promotional offer's `offerIdentifier` (its claims'), when `promotional`.
    var offerId: String? = nil
}

extension Population {
    /// Whether subscription `i`'s timeline (as revised so far) still has its customer turn
    /// auto-renew off at `cancelAt`.
    func stillCancels(_ i: Int, at cancelAt: Int64) -> Bool {
        timeline(i).contains { $0.time == cancelAt && $0.kind == .autoRenewOff }
    }

    /// The customer who was going to turn auto-renew off at `cancelAt` stays after what the
    /// cancel page showed at `at`: the timeline is replaced from `at` on by (with a switch, a plan
    /// change scheduled at `at`) a renewal at every period end until the generation horizon, the
    /// first at the promotional offer when `save.promotional`; the auto-renew-off and everything
    /// after `at` go. False (nothing changed) unless the subscription is active with auto-renew
    /// on at `at` and still cancels at `cancelAt`.
    func avertCancellation(_ i: Int, at: Int64, cancelAt: Int64, save: CancelPageSave) -> Bool {
        revisions.withLock { rev in
            let current = rev.timelines[i].map { $0[...] } ?? generatedTimeline(i)
            guard current.contains(where: { $0.time == cancelAt && $0.kind == .autoRenewOff }) else { return false }
            let s = SubscriptionState.fold(current, at: at, catalog: catalog)
            guard s.exists, s.status == 1, s.autoRenew, s.latest.expiresDate > at else { return false }
            var out = Array(current.prefix { $0.time <= at })
            var product = s.autoRenewProduct
            var tier = s.latest.priceTier
            if let target = save.switchTo, target != product {
                out.append(target == s.latest.product
                    ? TimelineEvent(at, .planChangeCancelled) : TimelineEvent(at, .planChangeScheduled, a: UInt8(target)))
                product = target
                tier = 0
            }
            let horizon = config.start + Int64(config.horizonDays) * SimTime.day
            let unit = catalog.products[product].unit
            var offer: SimOffer = save.promotional ? .promotional : .none
            var renewAt = s.latest.expiresDate
            while renewAt < horizon {
                out.append(TimelineEvent(renewAt, .renewal, a: UInt8(product), b: offer.rawValue, c: UInt8(tier)))
                renewAt = SimSchedule.expires(purchase: renewAt, unit: unit, offer: offer)
                offer = .none
            }
            rev.timelines[i] = out
            // Answers to refund requests from now on work on the revised timeline.
            rev.consumption.originals = rev.consumption.originals.filter { $0.key.subscriber != i }
            return true
        }
    }
}
