/// One accepted answer to Send Consumption Information.
public struct ConsumptionAnswer: Sendable, Hashable {
    public var subscriber: Int
    public var transactionIndex: Int
    /// The simulated moment it arrived.
    public var receivedAt: Int64
    public var info: ConsumptionInfo
    /// The request it answers (its time): the latest request about that transaction at or before
    /// ``receivedAt``; nil when there is none.
    public var requestedAt: Int64?
    /// Received by the request's deadline.
    public var inTime: Bool
}

/// What ``Population`` keeps of refund requests at run time: every accepted answer, in order, and
/// for each decision an answer changed, the timeline from the decision on as it was before (so a
/// later answer can change it back).
struct ConsumptionLedger: Sendable {
    struct DecisionKey: Hashable {
        var subscriber: Int
        var time: Int64
    }

    var answers: [ConsumptionAnswer] = []
    var originals: [DecisionKey: [TimelineEvent]] = [:]
}

extension Population {
    /// Every accepted answer so far, in the order received.
    public var consumptionAnswers: [ConsumptionAnswer] { revisions.withLock { $0.consumption.answers } }

    /// Whether answers changed the decision of subscription `i` at `time` from the generated one.
    public func decisionChanged(_ i: Int, at time: Int64) -> Bool {
        revisions.withLock { rev in
            guard let original = rev.consumption.originals[.init(subscriber: i, time: time)] else { return false }
            let tl = rev.timelines[i] ?? Array(generatedTimeline(i))
            return !tl.contains { $0.time == time && $0.kind == original[0].kind }
        }
    }

    /// Records an answer about transaction `k` of subscription `i` received at `now`. An answer in
    /// time may change Apple's decision (`effect`, drawn once per request from the seed): a
    /// refund becomes `REFUND_DECLINED` when the app prefers `DECLINE`, a decline becomes a
    /// refund when it prefers `GRANT_FULL` or `GRANT_PRORATED`; the latest answer in time is
    /// the one that counts. Returns the answer and whether the timeline changed (from the
    /// decision on, which is after `now`).
    public func answerConsumption(_ i: Int, transaction k: Int, at now: Int64, info: ConsumptionInfo, effect: Double)
        -> (answer: ConsumptionAnswer, changed: Bool)
    {
        revisions.withLock { rev in
            let tl = rev.timelines[i] ?? Array(generatedTimeline(i))
            let request = Self.refundRequests(in: tl, subscriber: i).last { $0.transactionIndex == k && $0.time <= now }
            let answer = ConsumptionAnswer(
                subscriber: i, transactionIndex: k, receivedAt: now, info: info, requestedAt: request?.time,
                inTime: request.map { now <= $0.deadline } ?? false)
            rev.consumption.answers.append(answer)
            guard let request, answer.inTime, let d = request.decisionIndex, request.decisionTime > now else {
                return (answer, false)
            }
            let key = ConsumptionLedger.DecisionKey(subscriber: i, time: request.decisionTime)
            let original = rev.consumption.originals[key] ?? Array(tl[d...])
            var draw = SimRandom(config.seed, UInt64(i), UInt64(request.time), 45)
            let moved = draw.chance(effect)
            let suffix: [TimelineEvent]
            switch (original[0].kind, info.refundPreference) {
            case (.refund, "DECLINE"?) where moved:
                suffix = declined(original, before: SubscriptionState.fold(tl[..<d], at: request.decisionTime, catalog: catalog))
            case (.refundDeclined, let p?) where moved && p.hasPrefix("GRANT_"):
                suffix = [refund(request, prorated: p == "GRANT_PRORATED")]
            default:
                suffix = original
            }
            guard suffix != Array(tl[d...]) else { return (answer, false) }
            rev.consumption.originals[key] = original
            rev.timelines[i] = Array(tl[..<d]) + suffix
            return (answer, true)
        }
    }

    /// A refund decision (`original` from it on) turned into a decline: a reversal that followed
    /// it goes too, the rest stays; a refund that ended the subscription leaves it going on.
    private func declined(_ original: [TimelineEvent], before s: SubscriptionState) -> [TimelineEvent] {
        let decline = TimelineEvent(original[0].time, .refundDeclined)
        var rest = Array(original.dropFirst())
        if let r = rest.firstIndex(where: { !$0.isRefundRequest }), rest[r].kind == .refundReversed {
            rest.remove(at: r)
            return [decline] + rest
        }
        return [decline] + rest + continuation(s)
    }

    /// What a subscription does after a refund that did not happen, as the customer had chosen:
    /// expiry at the period end with auto-renew off (intent 1), an unconsented price increase
    /// (3) or a discontinued product (4); else a renewal every period until the horizon (the
    /// first with a pending promotional offer).
    private func continuation(_ s: SubscriptionState) -> [TimelineEvent] {
        let horizon = config.start + Int64(config.horizonDays) * SimTime.day
        let end = s.latest.expiresDate
        guard end < horizon else { return [] }
        let product = s.autoRenewProduct
        if !s.autoRenew { return [TimelineEvent(end, .expire, a: 1)] }
        if s.priceIncrease == .pending { return [TimelineEvent(end, .expire, a: 3)] }
        if product == catalog.discontinuedProduct && end >= config.start + 21 * SimTime.day {
            return [TimelineEvent(end, .expire, a: 4)]
        }
        var tier = s.latest.priceTier + (s.priceIncrease == .accepted ? 1 : 0)
        if product != s.latest.product { tier = 0 }
        var offer = s.pendingOffer
        var out: [TimelineEvent] = []
        var renewAt = end
        while renewAt < horizon {
            out.append(TimelineEvent(renewAt, .renewal, a: UInt8(product), b: offer.rawValue, c: UInt8(tier)))
            renewAt = SimSchedule.expires(purchase: renewAt, unit: catalog.products[product].unit, offer: offer)
            offer = .none
        }
        return out
    }

    /// The refund a granted request becomes at its decision (it ends the subscription): revocation
    /// reason 1 (an issue with the app) for `FULFILLMENT_ISSUE`, else 0; prorated at 50 % or full.
    private func refund(_ request: SimRefundRequest, prorated: Bool) -> TimelineEvent {
        TimelineEvent(
            request.decisionTime, .refund, a: request.reason == .fulfillmentIssue ? 1 : 0, b: prorated ? 1 : 0,
            c: prorated ? 50 : 100)
    }
}
