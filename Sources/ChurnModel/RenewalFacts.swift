import AppStoreModels
import Foundation

/// Decoded renewal info: Apple's `JWSRenewalInfoDecodedPayload`, or one element of a legacy
/// `pending_renewal_info`. It describes the *next* renewal. Property names are Apple's JSON
/// field names; `Codable` uses those keys with dates as Int64 milliseconds since 1970.
public struct RenewalFacts: Sendable, Equatable, Hashable, Codable {
    public var originalTransactionId: String
    /// The product that will renew; differs from `productId` after a pending downgrade or
    /// crossgrade.
    public var autoRenewProductId: String?
    /// The current product.
    public var productId: String?
    /// Raw `autoRenewStatus` (`AutoRenewStatus`): 1 on, 0 off.
    public var autoRenewStatus: Int?
    /// True while Apple is still retrying a failed charge.
    public var isInBillingRetryPeriod: Bool?
    /// End of the Billing Grace Period, when one applies.
    public var gracePeriodExpiresDate: Date?
    /// Raw `expirationIntent` (`ExpirationIntent`); present only after expiry.
    public var expirationIntent: Int?
    /// Raw `priceIncreaseStatus` (`PriceIncreaseStatus`); absent without a price increase.
    public var priceIncreaseStatus: Int?
    /// Raw `offerType` of the offer that applies at the next renewal.
    public var offerType: Int?
    public var offerIdentifier: String?
    /// Raw `offerDiscountType` of the offer that applies at the next renewal.
    public var offerDiscountType: String?
    /// When the latest purchase expires, i.e. the next renewal.
    public var renewalDate: Date?
    /// Next renewal price in milliunits.
    public var renewalPrice: Int64?
    /// ISO 4217 code for `renewalPrice`.
    public var currency: String?
    /// Win-back offers redeemable now, best first. Empty during grace or billing retry.
    public var eligibleWinBackOfferIds: [String]?
    /// When Apple signed the payload; nil on the legacy receipt path.
    public var signedDate: Date?
    /// Start of the current paid run, ignoring gaps of up to 60 days.
    public var recentSubscriptionStartDate: Date?
    /// Raw `environment`.
    public var environment: String?

    public init(
        originalTransactionId: String,
        autoRenewProductId: String? = nil,
        productId: String? = nil,
        autoRenewStatus: Int? = nil,
        isInBillingRetryPeriod: Bool? = nil,
        gracePeriodExpiresDate: Date? = nil,
        expirationIntent: Int? = nil,
        priceIncreaseStatus: Int? = nil,
        offerType: Int? = nil,
        offerIdentifier: String? = nil,
        offerDiscountType: String? = nil,
        renewalDate: Date? = nil,
        renewalPrice: Int64? = nil,
        currency: String? = nil,
        eligibleWinBackOfferIds: [String]? = nil,
        signedDate: Date? = nil,
        recentSubscriptionStartDate: Date? = nil,
        environment: String? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.autoRenewProductId = autoRenewProductId
        self.productId = productId
        self.autoRenewStatus = autoRenewStatus
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.expirationIntent = expirationIntent
        self.priceIncreaseStatus = priceIncreaseStatus
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.renewalDate = renewalDate
        self.renewalPrice = renewalPrice
        self.currency = currency
        self.eligibleWinBackOfferIds = eligibleWinBackOfferIds
        self.signedDate = signedDate
        self.recentSubscriptionStartDate = recentSubscriptionStartDate
        self.environment = environment
    }

    private enum CodingKeys: String, CodingKey {
        case originalTransactionId, autoRenewProductId, productId, autoRenewStatus
        case isInBillingRetryPeriod, gracePeriodExpiresDate, expirationIntent, priceIncreaseStatus
        case offerType, offerIdentifier, offerDiscountType, renewalDate, renewalPrice, currency
        case eligibleWinBackOfferIds, signedDate, recentSubscriptionStartDate, environment
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = try c.decode(String.self, forKey: .originalTransactionId)
        autoRenewProductId = try c.decodeIfPresent(String.self, forKey: .autoRenewProductId)
        productId = try c.decodeIfPresent(String.self, forKey: .productId)
        autoRenewStatus = try c.decodeIfPresent(Int.self, forKey: .autoRenewStatus)
        isInBillingRetryPeriod = try c.decodeIfPresent(Bool.self, forKey: .isInBillingRetryPeriod)
        gracePeriodExpiresDate = try c.decodeMilliseconds(forKey: .gracePeriodExpiresDate)
        expirationIntent = try c.decodeIfPresent(Int.self, forKey: .expirationIntent)
        priceIncreaseStatus = try c.decodeIfPresent(Int.self, forKey: .priceIncreaseStatus)
        offerType = try c.decodeIfPresent(Int.self, forKey: .offerType)
        offerIdentifier = try c.decodeIfPresent(String.self, forKey: .offerIdentifier)
        offerDiscountType = try c.decodeIfPresent(String.self, forKey: .offerDiscountType)
        renewalDate = try c.decodeMilliseconds(forKey: .renewalDate)
        renewalPrice = try c.decodeIfPresent(Int64.self, forKey: .renewalPrice)
        currency = try c.decodeIfPresent(String.self, forKey: .currency)
        eligibleWinBackOfferIds = try c.decodeIfPresent([String].self, forKey: .eligibleWinBackOfferIds)
        signedDate = try c.decodeMilliseconds(forKey: .signedDate)
        recentSubscriptionStartDate = try c.decodeMilliseconds(forKey: .recentSubscriptionStartDate)
        environment = try c.decodeIfPresent(String.self, forKey: .environment)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(originalTransactionId, forKey: .originalTransactionId)
        try c.encodeIfPresent(autoRenewProductId, forKey: .autoRenewProductId)
        try c.encodeIfPresent(productId, forKey: .productId)
        try c.encodeIfPresent(autoRenewStatus, forKey: .autoRenewStatus)
        try c.encodeIfPresent(isInBillingRetryPeriod, forKey: .isInBillingRetryPeriod)
        try c.encodeMilliseconds(gracePeriodExpiresDate, forKey: .gracePeriodExpiresDate)
        try c.encodeIfPresent(expirationIntent, forKey: .expirationIntent)
        try c.encodeIfPresent(priceIncreaseStatus, forKey: .priceIncreaseStatus)
        try c.encodeIfPresent(offerType, forKey: .offerType)
        try c.encodeIfPresent(offerIdentifier, forKey: .offerIdentifier)
        try c.encodeIfPresent(offerDiscountType, forKey: .offerDiscountType)
        try c.encodeMilliseconds(renewalDate, forKey: .renewalDate)
        try c.encodeIfPresent(renewalPrice, forKey: .renewalPrice)
        try c.encodeIfPresent(currency, forKey: .currency)
        try c.encodeIfPresent(eligibleWinBackOfferIds, forKey: .eligibleWinBackOfferIds)
        try c.encodeMilliseconds(signedDate, forKey: .signedDate)
        try c.encodeMilliseconds(recentSubscriptionStartDate, forKey: .recentSubscriptionStartDate)
        try c.encodeIfPresent(environment, forKey: .environment)
    }
}

extension RenewalFacts {
    /// What a legacy verifyReceipt answer means when its `pending_renewal_info` has no element
    /// for a subscription that was in billing retry or grace at the previous poll and whose
    /// period is now over without a renewal or a revocation.
    ///
    /// Apple removes the element when the customer cancels during billing trouble (retry stops
    /// at once): the subscription expired because the customer chose to. That is what the App
    /// Store Server API says of the same customer (expired, auto-renew off, `expirationIntent`
    /// 1), and both paths must give the same segment, events and campaign. Later answers for the
    /// same period keep lacking the element, so a previous poll that drew this conclusion for the
    /// same transaction counts as well. Nil when the answer allows no such conclusion (no previous
    /// state, or one that was neither billing trouble nor this conclusion).
    public static func legacyCancelledDuringBillingTrouble(
        previous: SubscriptionSnapshot?, transaction: TransactionFacts, asOf: Date
    ) -> RenewalFacts? {
        guard let previous, transaction.revocationDate == nil, let expires = transaction.expiresDate, expires <= asOf
        else { return nil }
        let concludedBefore = previous.state == .expired && previous.transactionId == transaction.transactionId
            && previous.expirationIntent == .customerCancelled
        guard previous.state.isBillingTrouble || concludedBefore else { return nil }
        return RenewalFacts(
            originalTransactionId: transaction.originalTransactionId,
            autoRenewProductId: previous.autoRenewProductId ?? transaction.productId,
            productId: transaction.productId, autoRenewStatus: AutoRenewStatus.off.rawInt,
            isInBillingRetryPeriod: false, expirationIntent: ExpirationIntent.customerCancelled.rawInt,
            environment: transaction.environment)
    }
}
