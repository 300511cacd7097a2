import Foundation

/// The churn-risk segment of a subscription (docs/contracts.md). Raw values are the contract written
/// to `churnwatch.subscription_segments.segment`; the case order is the classification order
/// (first match wins).
public enum Segment: String, Sendable, Codable, CaseIterable {
    /// Latest transaction revoked (refund or family revoke).
    case refunded
    /// Expired, expiration intent 1 (the customer cancelled).
    case churnedVoluntary = "churned_voluntary"
    /// Expired, intent 2 (Apple stopped retrying the charge).
    case churnedBilling = "churned_billing"
    /// Expired, intent 3 (no consent to a price increase).
    case churnedPriceIncrease = "churned_price_increase"
    /// Expired, intent 4 (product not for sale at renewal).
    case churnedProductUnavailable = "churned_product_unavailable"
    /// Expired, intent 5, absent or unknown.
    case churnedOther = "churned_other"
    /// In billing retry, grace period not yet over: still has access.
    case gracePeriod = "grace_period"
    /// In billing retry without (or after) grace: no access, Apple still retrying.
    case billingRetry = "billing_retry"
    /// Active, auto-renew off: voluntary churn at period end unless saved.
    case willNotRenew = "will_not_renew"
    /// Active, auto-renew on, price increase awaiting consent.
    case priceIncreasePending = "price_increase_pending"
    /// Active, auto-renew on, renews into another product (downgrade or crossgrade).
    case planChangePending = "plan_change_pending"
    /// Active, auto-renew on, nothing pending.
    case active
    /// Never polled successfully, or Apple's status is one this version doesn't know.
    case unknown
}

extension Segment {
    /// The segments whose next renewal is in doubt: their next renewal's price is *revenue at
    /// risk* (docs/contracts.md), in `churnwatch report` and `churnwatch segments --revenue`
    /// alike. Churned and refunded subscriptions have no next renewal to lose; a pending plan
    /// change renews (into another product). In the contract's order.
    public static let revenueAtRisk: [Segment] = [.gracePeriod, .billingRetry, .willNotRenew, .priceIncreasePending]
}

/// A segment and the time it was first seen, kept while the segment doesn't change
/// (`segment_since`).
public struct SegmentState: Sendable, Equatable, Hashable, Codable {
    public var segment: Segment
    public var since: Date

    public init(_ segment: Segment, since: Date) {
        self.segment = segment
        self.since = since
    }

    private enum CodingKeys: String, CodingKey {
        case segment
        case since = "since_ms"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        segment = try c.decodeIfPresent(String.self, forKey: .segment).flatMap(Segment.init(rawValue:)) ?? .unknown
        since = try c.decodeMilliseconds(forKey: .since) ?? Date(timeIntervalSince1970: 0)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(segment, forKey: .segment)
        try c.encodeMilliseconds(since, forKey: .since)
    }
}

extension SegmentState {
    /// Same as `SegmentClassifier.next(previous:snapshot:asOf:)`.
    public static func next(previous: SegmentState?, snapshot: SubscriptionSnapshot?, asOf: Date) -> SegmentState {
        SegmentClassifier.next(previous: previous, snapshot: snapshot, asOf: asOf)
    }
}
