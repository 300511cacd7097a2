/// The ground truth as JSON: every subscription's state at a moment in docs/contracts.md's segment
/// vocabulary (`/_sim/truth`), and the true changes in a window (`/_sim/events`).
public enum TruthReport {
    /// `{"at": ISO, "subscriptions": [...]}`; subscriptions not yet purchased at `at` are left out.
    /// `fault` names the payload fault a subscription is served with (nil for none).
    public static func truth(_ population: Population, at t: Int64, fault: (Int) -> String?) -> [UInt8] {
        var w = JSONWriter(capacity: population.count * 420 + 64)
        w.beginObject()
        w.date("at", t)
        w.beginArray("subscriptions")
        for i in 0..<population.count where population.exists(i, at: t) {
            subscription(population, i, at: t, fault: fault(i), to: &w)
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }

    /// `{"states": [...]}`: each asked subscription's state at its own moment, as `truth` writes
    /// it plus `"at"` (a subscription not yet purchased then is written with `"exists": false`).
    public static func states(_ population: Population, at queries: [(subscriber: Int, at: Int64)]) -> [UInt8] {
        var w = JSONWriter(capacity: queries.count * 460 + 64)
        w.beginObject()
        w.beginArray("states")
        for (i, t) in queries {
            guard population.exists(i, at: t) else {
                w.beginObject()
                w.string("original_transaction_id", population.originalTransactionId(i))
                w.date("at", t)
                w.bool("exists", false)
                w.endObject()
                continue
            }
            subscription(population, i, at: t, fault: nil, to: &w, stamped: true)
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }

    /// One subscription's state at `t` as an object of `truth` (with `stamped`: its moment too).
    private static func subscription(_ population: Population, _ i: Int, at t: Int64, fault: String?, to w: inout JSONWriter,
                                     stamped: Bool = false) {
        let s = population.state(i, at: t)
        let catalog = population.catalog
        w.beginObject()
        w.string("original_transaction_id", population.originalTransactionId(i))
        if stamped { w.date("at", t) }
        w.string("environment", population.environment(i))
        w.string("app_account_token", population.appAccountToken(i))
        w.string("customer_ref", population.customerRef(i))
        w.string("segment", s.segment(at: t).rawValue)
        w.date("segment_since", s.segmentSince)
        w.int("status", Int64(s.status))
        w.string("product_id", catalog.products[s.latest.product].id)
        w.string("auto_renew_product_id", catalog.products[s.autoRenewProduct].id)
        w.bool("auto_renew", s.reportedAutoRenew)
        w.date("expires_at", s.latest.expiresDate)
        w.bool("in_billing_retry", s.isInBillingRetry)
        w.date("grace_period_expires_at", s.gracePeriodExpiresDate)
        w.int("expiration_intent", s.expirationIntent.map(Int64.init))
        w.int("revocation_reason", s.latest.revocation.map { Int64($0.reason) })
        w.int("price_increase_status", s.priceIncrease == .none ? nil : s.priceIncrease == .pending ? 0 : 1)
        w.int("offer_type", s.latest.offer.offerType.map(Int64.init))
        w.string("transaction_id", population.transactionId(i, s.latest.index))
        w.string("fault", fault)
        w.endObject()
    }

    /// `{"from": ISO, "to": ISO, "events": [{"original_transaction_id", "event", "occurred_at",
    /// "details"}]}` for events with `from <= time < to`, by time then subscription. With
    /// `notification` (the UUID of the notification that reported an event, nil for none), each
    /// event also says `notified` and `notification_uuid`.
    public static func events(
        _ population: Population, from: Int64, to: Int64, notification: ((TruthEvent) -> String?)? = nil
    ) -> [UInt8] {
        let events = population.truthEvents(from: from, to: to)
        var w = JSONWriter(capacity: events.count * 200 + 64)
        w.beginObject()
        w.date("from", from)
        w.date("to", to)
        w.beginArray("events")
        for e in events {
            w.beginObject()
            w.string("original_transaction_id", population.originalTransactionId(e.subscriber))
            w.string("event", e.kind.rawValue)
            w.date("occurred_at", e.time)
            if let notification {
                let uuid = notification(e)
                w.bool("notified", uuid != nil)
                w.string("notification_uuid", uuid)
            }
            w.beginObject("details")
            for (k, v) in e.details {
                if k == "transaction_index", case .int(let index) = v {
                    w.string("transaction_id", population.transactionId(e.subscriber, Int(index)))
                    continue
                }
                switch v {
                case .string(let s): w.string(k, s)
                case .int(let n): w.int(k, n)
                }
            }
            w.endObject()
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }
}
