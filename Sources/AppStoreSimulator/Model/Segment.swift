/// The churn segments of docs/contracts.md, in precedence order ("first match wins").
public enum Segment: String, Sendable, Hashable, CaseIterable {
    case refunded
    case churnedVoluntary = "churned_voluntary"
    case churnedBilling = "churned_billing"
    case churnedPriceIncrease = "churned_price_increase"
    case churnedProductUnavailable = "churned_product_unavailable"
    case churnedOther = "churned_other"
    case gracePeriod = "grace_period"
    case billingRetry = "billing_retry"
    case willNotRenew = "will_not_renew"
    case priceIncreasePending = "price_increase_pending"
    case planChangePending = "plan_change_pending"
    case active
}

/// The churn events of docs/contracts.md.
public enum TruthEventKind: String, Sendable, Hashable, CaseIterable {
    case autoRenewDisabled = "auto_renew_disabled"
    case autoRenewEnabled = "auto_renew_enabled"
    case billingRetryStarted = "billing_retry_started"
    case gracePeriodStarted = "grace_period_started"
    case gracePeriodExpired = "grace_period_expired"
    case billingRecovered = "billing_recovered"
    case renewed
    case expired
    case refunded
    case refundReversed = "refund_reversed"
    case planChangeScheduled = "plan_change_scheduled"
    case planChangeCancelled = "plan_change_cancelled"
    case planChanged = "plan_changed"
    case priceIncreasePending = "price_increase_pending"
    case priceIncreaseAccepted = "price_increase_accepted"
    case resubscribed
    /// A refund request Apple asked the app about (`CONSUMPTION_REQUEST`); no change of state.
    case refundRequested = "refund_requested"
    /// Apple declined a refund request (`REFUND_DECLINED`); no change of state.
    case refundDeclined = "refund_declined"
}

/// A true change in a subscription's life, at the moment it happened.
public struct TruthEvent: Sendable, Hashable {
    public var subscriber: Int
    /// ms since 1970.
    public var time: Int64
    public var kind: TruthEventKind
    /// Old and new values, flat (string or integer values).
    public var details: [(key: String, value: DetailValue)]
    /// Position of the timeline event it comes from (one change can be several events).
    public var eventIndex = 0

    public enum DetailValue: Sendable, Hashable {
        case string(String)
        case int(Int64)
    }

    public static func == (l: TruthEvent, r: TruthEvent) -> Bool {
        l.subscriber == r.subscriber && l.time == r.time && l.kind == r.kind
            && l.details.map(\.key) == r.details.map(\.key) && l.details.map(\.value) == r.details.map(\.value)
    }

    public func hash(into h: inout Hasher) {
        h.combine(subscriber)
        h.combine(time)
        h.combine(kind)
    }
}
