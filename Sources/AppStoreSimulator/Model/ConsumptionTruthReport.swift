/// The ground truth of refund requests as JSON (`GET /_sim/truth/consumption`): every request in
/// a window with its decision and the app's answers, and the answers that answered no request.
/// A function of the timelines, the answers received and the moment.
public enum ConsumptionTruthReport {
    /// `{"from", "to", "requests": [...], "unrequested_answers": [...]}`: requests with
    /// `from <= requested_at < to` by time then subscription (docs/simulator.md, "Refund
    /// requests"); every answer that matched no request, in the order received.
    public static func json(_ population: Population, from: Int64, to: Int64, now: Int64, options: NotificationOptions) -> [UInt8] {
        let answers = population.consumptionAnswers
        var byRequest: [String: [ConsumptionAnswer]] = [:]
        for a in answers {
            if let t = a.requestedAt { byRequest["\(a.subscriber)/\(t)", default: []].append(a) }
        }
        var requests: [SimRefundRequest] = []
        for i in 0..<population.count {
            requests += population.refundRequests(i).filter { $0.time >= from && $0.time < to }
        }
        requests.sort { ($0.time, $0.subscriber) < ($1.time, $1.subscriber) }
        var w = JSONWriter(capacity: requests.count * 400 + answers.count * 200 + 64)
        w.beginObject()
        w.date("from", from)
        w.date("to", to)
        w.beginArray("requests")
        for r in requests {
            write(r, answers: byRequest["\(r.subscriber)/\(r.time)"] ?? [], population, now: now, options: options, to: &w)
        }
        w.endArray()
        w.beginArray("unrequested_answers")
        for a in answers where a.requestedAt == nil {
            w.beginObject()
            w.string("original_transaction_id", population.originalTransactionId(a.subscriber))
            w.string("transaction_id", population.transactionId(a.subscriber, a.transactionIndex))
            w.date("received_at", a.receivedAt)
            a.info.write("body", to: &w)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }

    /// One request: who, when, why, Apple's decision (as the timeline now stands; `decided_at`
    /// null while it is still to come) and the answers to it in the order received.
    private static func write(
        _ r: SimRefundRequest, answers: [ConsumptionAnswer], _ population: Population, now: Int64,
        options: NotificationOptions, to w: inout JSONWriter
    ) {
        let i = r.subscriber
        w.beginObject()
        w.string("original_transaction_id", population.originalTransactionId(i))
        w.string("transaction_id", population.transactionId(i, r.transactionIndex))
        w.string("environment", population.environment(i))
        w.string("notification_uuid", population.notificationUUID(i, r.eventIndex))
        w.bool("notified", population.isNotified(i, r.eventIndex, options: options))
        w.date("requested_at", r.time)
        w.date("deadline", r.deadline)
        w.string("reason", r.reason.apple)
        w.string("decision", r.decision.map { $0 == .refund ? "REFUND" : "REFUND_DECLINED" })
        w.date("decided_at", r.decision != nil && r.decisionTime <= now ? r.decisionTime : nil)
        w.bool("changed_by_answer", population.decisionChanged(i, at: r.decisionTime))
        w.beginArray("answers")
        for a in answers {
            w.beginObject()
            w.date("received_at", a.receivedAt)
            w.bool("in_time", a.inTime)
            a.info.write("body", to: &w)
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }
}
