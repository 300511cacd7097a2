/// Refund requests (docs/simulator.md, "Refund requests"), written over a finished timeline:
/// a `consumptionRequest` before a share of the refunds, and requests that Apple declines.
/// They draw from streams of their own (seed, index, 11 and 12) and change no state, so every
/// other event of a seed is the same whatever ``PopulationConfig/consumptionRequestShare`` and
/// ``PopulationConfig/refundDeclinedRate`` are.
struct RefundRequestGenerator {
    let generator: PopulationGenerator

    private var hour: Int64 { SimTime.hour }
    /// Apple decides 14 to 60 hours after the request (after the 12-hour answer window).
    private static let decisionDelay: ClosedRange<Int64> = 14 * 3600...60 * 3600

    /// `timeline` with the refund requests of subscription `i` merged in (family members ask for
    /// no refunds: they did not pay).
    func add(to timeline: [TimelineEvent], subscriber i: Int, family: Bool) -> [TimelineEvent] {
        guard !family, !timeline.isEmpty else { return timeline }
        let beforeRefunds = requestsBeforeRefunds(timeline, subscriber: i)
        let declined = declinedRequests(timeline, subscriber: i, otherRequests: beforeRefunds.map(\.time))
        let extra = (beforeRefunds + declined).sorted { $0.time < $1.time }
        guard !extra.isEmpty else { return timeline }
        // Merge; at equal times the generated event comes first.
        var out: [TimelineEvent] = []
        out.reserveCapacity(timeline.count + extra.count)
        var j = 0
        for e in timeline {
            while j < extra.count && extra[j].time < e.time {
                out.append(extra[j])
                j += 1
            }
            out.append(e)
        }
        out.append(contentsOf: extra[j...])
        return out
    }

    /// A request 14–60 h before a share of the refunds (never before the refunded charge: a
    /// refund too soon after it gets none). Its decision is that refund.
    private func requestsBeforeRefunds(_ timeline: [TimelineEvent], subscriber i: Int) -> [TimelineEvent] {
        var rng = SimRandom(generator.config.seed, UInt64(i), 11)
        var charge = timeline[0].time
        var out: [TimelineEvent] = []
        for e in timeline {
            if e.createsTransaction { charge = e.time }
            guard e.kind == .refund else { continue }
            // The same draws for every refund, whatever the share.
            let asked = rng.chance(generator.config.consumptionRequestShare)
            let f = rng.unit()
            let reason = e.a == 1 ? ConsumptionRequestReason.fulfillmentIssue : Self.reason(&rng, appIssue: false)
            let room = (e.time - charge - SimTime.minute) / 1000
            let lo = Self.decisionDelay.lowerBound
            guard asked, room >= lo else { continue }
            let delay = lo + Int64(f * Double(min(Self.decisionDelay.upperBound, room) - lo))
            out.append(TimelineEvent(e.time - delay * 1000, .consumptionRequest, a: reason.rawValue, d: UInt32(delay)))
        }
        return out
    }

    /// Per paid period, with probability ``PopulationConfig/refundDeclinedRate``: a request 2 h to
    /// 10 days (at most half the period) after the charge, declined 14–60 h later, both within the period (before its
    /// next charge, failure, refund, revoke or expiry, and before any other request).
    private func declinedRequests(_ timeline: [TimelineEvent], subscriber i: Int, otherRequests: [Int64]) -> [TimelineEvent] {
        let config = generator.config, catalog = generator.catalog
        var rng = SimRandom(config.seed, UInt64(i), 12)
        var out: [TimelineEvent] = []
        for (j, e) in timeline.enumerated() where e.createsTransaction {
            let offer = SimOffer(rawValue: e.b) ?? .none
            let expires = SimSchedule.expires(purchase: e.time, unit: catalog.products[Int(e.a)].unit, offer: offer)
            let happens = rng.chance(config.refundDeclinedRate)
            let after = rng.between(2 * hour, min(10 * SimTime.day, (expires - e.time) / 2)) / 1000 * 1000
            let delay = rng.int(Self.decisionDelay)
            let appIssue = rng.chance(0.2)
            let reason = Self.reason(&rng, appIssue: appIssue)
            guard happens, offer != .freeTrial else { continue }
            var end = min(generator.horizon, expires)
            if let next = timeline[(j + 1)...].first(where: Self.endsPeriod) { end = min(end, next.time) }
            if let other = otherRequests.first(where: { $0 > e.time }) { end = min(end, other) }
            let at = e.time + after
            guard at + delay * 1000 < end else { continue }
            out.append(TimelineEvent(at, .consumptionRequest, a: reason.rawValue, d: UInt32(delay)))
            out.append(TimelineEvent(at + delay * 1000, .refundDeclined))
        }
        return out
    }

    /// Events after which a period's charge is no longer the one a request is about.
    private static func endsPeriod(_ e: TimelineEvent) -> Bool {
        switch e.kind {
        case .refund, .familyRevoke, .billingFailure, .expire: true
        default: e.createsTransaction
        }
    }

    /// A reason: `FULFILLMENT_ISSUE` for an issue with the app, else unintended 40 %,
    /// unsatisfied 40 %, other 15 %, legal 5 %.
    private static func reason(_ rng: inout SimRandom, appIssue: Bool) -> ConsumptionRequestReason {
        let other: [ConsumptionRequestReason] = [.unintendedPurchase, .unsatisfiedWithPurchase, .other, .legal]
        let pick = other[rng.weighted([0.40, 0.40, 0.15, 0.05])]
        return appIssue ? .fulfillmentIssue : pick
    }
}
