/// One transaction of a subscription as of some moment: a purchase, renewal, recovery,
/// upgrade or resubscription, with what happened to it since (refund, upgrade).
public struct SimTransaction: Sendable, Hashable {
    public struct Revocation: Sendable, Hashable {
        /// ms since 1970.
        public var date: Int64
        /// Apple's `revocationReason`: 0 other, 1 app issue.
        public var reason: Int32
        /// `REFUND_FULL`, `REFUND_PRORATED` or `FAMILY_REVOKE`.
        public var type: String
        /// Milliunits of a percent (100000 = 100 %).
        public var percentage: Int32
    }

    /// 0 for the original purchase; the transaction id is derived from it.
    public var index: Int
    public var purchaseDate: Int64
    public var expiresDate: Int64
    public var product: Int
    public var offer: SimOffer
    public var priceTier: Int
    /// `RENEWAL` (Apple-initiated) rather than `PURCHASE`.
    public var isRenewal: Bool
    public var revocation: Revocation?
    /// When an immediate upgrade replaced this transaction.
    public var upgradedAt: Int64?
    /// Last modification: purchase, upgrade, refund or its reversal (history sorts by it).
    public var modifiedAt: Int64
}

/// Where a subscription stands in its billing cycle.
public enum SubscriptionPhase: Sendable, Hashable {
    case active
    /// The renewal charge failed at `since`; `graceEnd` is the end of the grace period, if any.
    case billingRetry(since: Int64, graceEnd: Int64?)
    /// Expired at `at` with Apple's expiration intent (1–5).
    case expired(intent: Int, at: Int64)
}

/// The price increase state of the coming renewal.
public enum PriceIncreaseState: Sendable, Hashable {
    case none
    /// Awaiting the customer's consent (`priceIncreaseStatus` 0).
    case pending
    /// Consented, or notified of an increase that needs none (`priceIncreaseStatus` 1).
    case accepted
}
