/// A refund request in a subscription's timeline (docs/simulator.md, "Refund requests").
public struct SimRefundRequest: Sendable, Hashable {
    public var subscriber: Int
    /// Position of the `consumptionRequest` event in the timeline.
    public var eventIndex: Int
    /// When Apple sent `CONSUMPTION_REQUEST` (ms since 1970).
    public var time: Int64
    public var reason: ConsumptionRequestReason
    /// The transaction the customer wants refunded: the latest at the request.
    public var transactionIndex: Int
    /// When Apple decides.
    public var decisionTime: Int64
    /// Position of the decision (`refund` or `refundDeclined` at ``decisionTime``); nil when a
    /// redeemed offer replaced the timeline before it.
    public var decisionIndex: Int?
    public var decision: TimelineEvent.Kind?

    /// The end of the 12 hours in which Apple takes the app's answer.
    public var deadline: Int64 { time + SimRefundRequest.answerWindow }

    /// Apple takes consumption information for 12 hours after `CONSUMPTION_REQUEST`.
    public static let answerWindow = 12 * SimTime.hour
}

extension Population {
    /// The refund requests of a timeline, in order.
    static func refundRequests(in tl: [TimelineEvent], subscriber i: Int) -> [SimRefundRequest] {
        var transactions = 0
        var out: [SimRefundRequest] = []
        for (k, e) in tl.enumerated() {
            if e.createsTransaction { transactions += 1 }
            guard e.kind == .consumptionRequest else { continue }
            let decidedAt = e.time + Int64(e.d) * 1000
            let d = tl[(k + 1)...].prefix { $0.time <= decidedAt }.firstIndex {
                $0.time == decidedAt && ($0.kind == .refund || $0.kind == .refundDeclined)
            }
            out.append(SimRefundRequest(
                subscriber: i, eventIndex: k, time: e.time, reason: ConsumptionRequestReason(rawValue: e.a) ?? .other,
                transactionIndex: transactions - 1, decisionTime: decidedAt, decisionIndex: d, decision: d.map { tl[$0].kind }))
        }
        return out
    }

    /// The refund requests of subscription `i`, as its timeline stands.
    public func refundRequests(_ i: Int) -> [SimRefundRequest] {
        Self.refundRequests(in: Array(timeline(i)), subscriber: i)
    }
}
