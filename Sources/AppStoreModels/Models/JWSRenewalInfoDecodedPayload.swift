import Foundation

/// The decoded payload of signed renewal info (`signedRenewalInfo`): what happens at the **next**
/// renewal of an auto-renewable subscription. Has no `bundleId`.
///
/// Dates are ``EpochMilliseconds``; prices are milliunits. Enumerated fields are stored raw with a
/// typed accessor. Unknown JSON fields are ignored.
///
/// [JWSRenewalInfoDecodedPayload](https://developer.apple.com/documentation/appstoreserverapi/jwsrenewalinfodecodedpayload)
public struct JWSRenewalInfoDecodedPayload: Codable, Hashable, Sendable {
    /// The subscription key.
    public var originalTransactionId: String?
    /// The current product.
    public var productId: String?
    /// The product that will renew; differs after a pending downgrade or crossgrade.
    public var autoRenewProductId: String?
    /// Raw `autoRenewStatus` (1 on, 0 off). See ``autoRenewStatus``.
    public var rawAutoRenewStatus: Int32?
    /// Raw `expirationIntent`; present only after expiry. See ``expirationIntent``.
    public var rawExpirationIntent: Int32?
    /// `true` while Apple is still retrying the charge.
    public var isInBillingRetryPeriod: Bool?
    /// End of the Billing Grace Period, when one applies.
    public var gracePeriodExpiresDate: EpochMilliseconds?
    /// Raw `priceIncreaseStatus`; absent without a price increase. See ``priceIncreaseStatus``.
    public var rawPriceIncreaseStatus: Int32?
    /// When the latest purchase expires, i.e. the next renewal.
    public var renewalDate: EpochMilliseconds?
    /// Next renewal price in milliunits of ``currency``.
    public var renewalPrice: Int64?
    /// ISO 4217 code of ``renewalPrice``.
    public var currency: String?
    /// Raw `offerType` of the offer that applies at renewal. See ``offerType``.
    public var rawOfferType: Int32?
    public var offerIdentifier: String?
    /// Raw `offerDiscountType`. See ``offerDiscountType``.
    public var rawOfferDiscountType: String?
    /// ISO 8601 duration, e.g. `P1M`.
    public var offerPeriod: String?
    /// Win-back offers redeemable now, best first. Never filled during grace or billing retry.
    public var eligibleWinBackOfferIds: [String]?
    /// Start of the current paid run, ignoring gaps of 60 days or less.
    public var recentSubscriptionStartDate: EpochMilliseconds?
    /// When Apple signed the JWS.
    public var signedDate: EpochMilliseconds?
    /// Raw `environment`. See ``environment``.
    public var rawEnvironment: String?
    /// The token that will apply to the next renewal, as sent. See ``appAccountTokenUUID``.
    public var appAccountToken: String?
    public var appTransactionId: String?
    /// Raw `renewalBillingPlanType`. See ``renewalBillingPlanType``.
    public var rawRenewalBillingPlanType: String?
    public var commitmentInfo: RenewalCommitmentInfo?
    /// Advanced Commerce API data, kept as received.
    public var advancedCommerceInfo: JSONValue?

    public init(
        originalTransactionId: String? = nil, productId: String? = nil,
        autoRenewProductId: String? = nil, rawAutoRenewStatus: Int32? = nil,
        rawExpirationIntent: Int32? = nil, isInBillingRetryPeriod: Bool? = nil,
        gracePeriodExpiresDate: EpochMilliseconds? = nil, rawPriceIncreaseStatus: Int32? = nil,
        renewalDate: EpochMilliseconds? = nil, renewalPrice: Int64? = nil,
        currency: String? = nil, rawOfferType: Int32? = nil, offerIdentifier: String? = nil,
        rawOfferDiscountType: String? = nil, offerPeriod: String? = nil,
        eligibleWinBackOfferIds: [String]? = nil,
        recentSubscriptionStartDate: EpochMilliseconds? = nil,
        signedDate: EpochMilliseconds? = nil, rawEnvironment: String? = nil,
        appAccountToken: String? = nil, appTransactionId: String? = nil,
        rawRenewalBillingPlanType: String? = nil, commitmentInfo: RenewalCommitmentInfo? = nil,
        advancedCommerceInfo: JSONValue? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.autoRenewProductId = autoRenewProductId
        self.rawAutoRenewStatus = rawAutoRenewStatus
        self.rawExpirationIntent = rawExpirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.rawPriceIncreaseStatus = rawPriceIncreaseStatus
        self.renewalDate = renewalDate
        self.renewalPrice = renewalPrice
        self.currency = currency
        self.rawOfferType = rawOfferType
        self.offerIdentifier = offerIdentifier
        self.rawOfferDiscountType = rawOfferDiscountType
        self.offerPeriod = offerPeriod
        self.eligibleWinBackOfferIds = eligibleWinBackOfferIds
        self.recentSubscriptionStartDate = recentSubscriptionStartDate
        self.signedDate = signedDate
        self.rawEnvironment = rawEnvironment
        self.appAccountToken = appAccountToken
        self.appTransactionId = appTransactionId
        self.rawRenewalBillingPlanType = rawRenewalBillingPlanType
        self.commitmentInfo = commitmentInfo
        self.advancedCommerceInfo = advancedCommerceInfo
    }

    public enum CodingKeys: String, CodingKey {
        case originalTransactionId, productId, autoRenewProductId
        case rawAutoRenewStatus = "autoRenewStatus"
        case rawExpirationIntent = "expirationIntent"
        case isInBillingRetryPeriod, gracePeriodExpiresDate
        case rawPriceIncreaseStatus = "priceIncreaseStatus"
        case renewalDate, renewalPrice, currency
        case rawOfferType = "offerType"
        case offerIdentifier
        case rawOfferDiscountType = "offerDiscountType"
        case offerPeriod, eligibleWinBackOfferIds, recentSubscriptionStartDate, signedDate
        case rawEnvironment = "environment"
        case appAccountToken, appTransactionId
        case rawRenewalBillingPlanType = "renewalBillingPlanType"
        case commitmentInfo, advancedCommerceInfo
    }
}

extension JWSRenewalInfoDecodedPayload {
    public var autoRenewStatus: AutoRenewStatus? {
        get { rawAutoRenewStatus.flatMap(AutoRenewStatus.init(rawValue:)) }
        set { rawAutoRenewStatus = newValue?.rawValue }
    }
    public var expirationIntent: ExpirationIntent? {
        get { rawExpirationIntent.flatMap(ExpirationIntent.init(rawValue:)) }
        set { rawExpirationIntent = newValue?.rawValue }
    }
    public var priceIncreaseStatus: PriceIncreaseStatus? {
        get { rawPriceIncreaseStatus.flatMap(PriceIncreaseStatus.init(rawValue:)) }
        set { rawPriceIncreaseStatus = newValue?.rawValue }
    }
    public var offerType: OfferType? {
        get { rawOfferType.flatMap(OfferType.init(rawValue:)) }
        set { rawOfferType = newValue?.rawValue }
    }
    public var offerDiscountType: OfferDiscountType? {
        get { rawOfferDiscountType.flatMap(OfferDiscountType.init(rawValue:)) }
        set { rawOfferDiscountType = newValue?.rawValue }
    }
    public var environment: AppStoreEnvironment? {
        get { rawEnvironment.flatMap(AppStoreEnvironment.init(rawValue:)) }
        set { rawEnvironment = newValue?.rawValue }
    }
    public var renewalBillingPlanType: BillingPlanType? {
        get { rawRenewalBillingPlanType.flatMap(BillingPlanType.init(rawValue:)) }
        set { rawRenewalBillingPlanType = newValue?.rawValue }
    }
    /// ``appAccountToken`` parsed as a UUID; `nil` when absent or not a UUID.
    public var appAccountTokenUUID: UUID? { appAccountToken.flatMap(UUID.init(uuidString:)) }
}
