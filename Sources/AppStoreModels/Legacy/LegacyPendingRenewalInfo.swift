/// One element of `pending_renewal_info[]` (one per auto-renewable, keyed by `product_id`), with
/// Apple's string-typed values decoded. Encodes back to Apple's string form.
///
/// [pending_renewal_info](https://developer.apple.com/documentation/appstorereceipts/responsebody/pending_renewal_info-data.dictionary)
public struct LegacyPendingRenewalInfo: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    public var productId: String?
    public var autoRenewProductId: String?
    /// Raw `auto_renew_status` (`"1"` will renew, `"0"` off). See ``autoRenewStatus``.
    public var rawAutoRenewStatus: Int32?
    /// Raw `expiration_intent` (1–5, as in the Server API). See ``expirationIntent``.
    public var rawExpirationIntent: Int32?
    /// `"1"` still retrying, `"0"` retry stopped; present only in the retry state.
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: EpochMilliseconds?
    /// `price_consent_status`: 0 pending, 1 consented.
    public var priceConsentStatus: Int32?
    /// Raw `price_increase_status`. See ``priceIncreaseStatus``.
    public var rawPriceIncreaseStatus: Int32?
    public var offerCodeRefName: String?
    public var promotionalOfferId: String?

    public init(
        originalTransactionId: String? = nil, productId: String? = nil,
        autoRenewProductId: String? = nil, rawAutoRenewStatus: Int32? = nil,
        rawExpirationIntent: Int32? = nil, isInBillingRetryPeriod: Bool? = nil,
        gracePeriodExpiresDate: EpochMilliseconds? = nil, priceConsentStatus: Int32? = nil,
        rawPriceIncreaseStatus: Int32? = nil, offerCodeRefName: String? = nil,
        promotionalOfferId: String? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.autoRenewProductId = autoRenewProductId
        self.rawAutoRenewStatus = rawAutoRenewStatus
        self.rawExpirationIntent = rawExpirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.priceConsentStatus = priceConsentStatus
        self.rawPriceIncreaseStatus = rawPriceIncreaseStatus
        self.offerCodeRefName = offerCodeRefName
        self.promotionalOfferId = promotionalOfferId
    }

    public enum CodingKeys: String, CodingKey {
        case originalTransactionId = "original_transaction_id"
        case productId = "product_id"
        case autoRenewProductId = "auto_renew_product_id"
        case rawAutoRenewStatus = "auto_renew_status"
        case rawExpirationIntent = "expiration_intent"
        case isInBillingRetryPeriod = "is_in_billing_retry_period"
        case gracePeriodExpiresDate = "grace_period_expires_date_ms"
        case priceConsentStatus = "price_consent_status"
        case rawPriceIncreaseStatus = "price_increase_status"
        case offerCodeRefName = "offer_code_ref_name"
        case promotionalOfferId = "promotional_offer_id"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = try c.decodeIfPresent(String.self, forKey: .originalTransactionId)
        productId = try c.decodeIfPresent(String.self, forKey: .productId)
        autoRenewProductId = try c.decodeIfPresent(String.self, forKey: .autoRenewProductId)
        rawAutoRenewStatus = try c.decodeLegacyInt32(.rawAutoRenewStatus)
        rawExpirationIntent = try c.decodeLegacyInt32(.rawExpirationIntent)
        isInBillingRetryPeriod = try c.decodeLegacyBool(.isInBillingRetryPeriod)
        gracePeriodExpiresDate = try c.decodeLegacyDate(.gracePeriodExpiresDate)
        priceConsentStatus = try c.decodeLegacyInt32(.priceConsentStatus)
        rawPriceIncreaseStatus = try c.decodeLegacyInt32(.rawPriceIncreaseStatus)
        offerCodeRefName = try c.decodeIfPresent(String.self, forKey: .offerCodeRefName)
        promotionalOfferId = try c.decodeIfPresent(String.self, forKey: .promotionalOfferId)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(originalTransactionId, forKey: .originalTransactionId)
        try c.encodeIfPresent(productId, forKey: .productId)
        try c.encodeIfPresent(autoRenewProductId, forKey: .autoRenewProductId)
        try c.encodeLegacy(rawAutoRenewStatus, forKey: .rawAutoRenewStatus)
        try c.encodeLegacy(rawExpirationIntent, forKey: .rawExpirationIntent)
        try c.encodeLegacy(isInBillingRetryPeriod, style: .digit, forKey: .isInBillingRetryPeriod)
        try c.encodeLegacy(gracePeriodExpiresDate, forKey: .gracePeriodExpiresDate)
        try c.encodeLegacy(priceConsentStatus, forKey: .priceConsentStatus)
        try c.encodeLegacy(rawPriceIncreaseStatus, forKey: .rawPriceIncreaseStatus)
        try c.encodeIfPresent(offerCodeRefName, forKey: .offerCodeRefName)
        try c.encodeIfPresent(promotionalOfferId, forKey: .promotionalOfferId)
    }

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
}
