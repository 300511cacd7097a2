import AppStoreModels
import Foundation

/// Classifies a snapshot into its segment: the table of docs/contracts.md, first match wins.
public enum SegmentClassifier {
    /// The segment of `snapshot` at `asOf`; `unknown` for nil (never verified) or an unknown
    /// status. `asOf` decides whether a grace period is still running.
    ///
    /// Conservative with unknown values: an unknown or absent expiration intent is
    /// `churned_other`; only an explicit auto-renew 0 makes `will_not_renew`, only an explicit
    /// price-increase 0 makes `price_increase_pending`.
    public static func segment(for snapshot: SubscriptionSnapshot?, asOf: Date) -> Segment {
        guard let s = snapshot else { return .unknown }
        // A revocation on the latest transaction wins even if the status lags behind it.
        if s.revocationDate != nil, s.state != .unknown { return .refunded }
        switch s.state {
        case .unknown:
            return .unknown
        case .revoked:
            return .refunded
        case .expired:
            switch s.expirationIntent {
            case .customerCancelled: return .churnedVoluntary
            case .billingError: return .churnedBilling
            case .customerDidNotConsentToPriceIncrease: return .churnedPriceIncrease
            case .productNotAvailable: return .churnedProductUnavailable
            case .other, nil: return .churnedOther
            }
        case .gracePeriod:
            if let end = s.gracePeriodExpiresDate, end <= asOf { return .billingRetry }
            return .gracePeriod
        case .billingRetry:
            return .billingRetry
        case .active:
            if s.autoRenewStatus == .off { return .willNotRenew }
            if s.priceIncreaseStatus == .customerHasNotResponded { return .priceIncreasePending }
            if s.pendingProductId != nil { return .planChangePending }
            return .active
        }
    }

    /// The segment state after a poll: `previous.since` is kept while the segment stays the
    /// same; a new segment starts at `asOf`.
    public static func next(previous: SegmentState?, snapshot: SubscriptionSnapshot?, asOf: Date) -> SegmentState {
        let segment = segment(for: snapshot, asOf: asOf)
        if let previous, previous.segment == segment { return previous }
        return SegmentState(segment, since: asOf)
    }
}
