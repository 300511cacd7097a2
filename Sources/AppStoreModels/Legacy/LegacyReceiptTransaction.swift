/// One element of `latest_receipt_info[]` (or `receipt.in_app[]`), with Apple's string-typed
/// values decoded: `*_ms` into ``EpochMilliseconds``, `"true"`/`"false"` into `Bool`,
/// numeric strings into integers. Encodes back to Apple's string form.
///
/// [latest_receipt_info](https://developer.apple.com/documentation/appstorereceipts/responsebody/latest_receipt_info-data.dictionary)
public struct LegacyReceiptTransaction: Codable, Hashable, Sendable {
    public var originalTransactionId: String?
    public var transactionId: String?
    public var productId: String?
    public var purchaseDate: EpochMilliseconds?
    public var originalPurchaseDate: EpochMilliseconds?
    public var expiresDate: EpochMilliseconds?
    /// Refund or family-revoke time.
    public var cancellationDate: EpochMilliseconds?
    /// Raw `cancellation_reason`: 1 app issue, 0 other. See ``cancellationReason``.
    public var rawCancellationReason: Int32?
    public var isTrialPeriod: Bool?
    public var isInIntroOfferPeriod: Bool?
    /// `true` only on the transaction an upgrade replaced.
    public var isUpgraded: Bool?
    public var promotionalOfferId: String?
    public var offerCodeRefName: String?
    /// Primary key of subscription events.
    public var webOrderLineItemId: String?
    public var subscriptionGroupIdentifier: String?
    /// Raw `in_app_ownership_type`. See ``inAppOwnershipType``.
    public var rawInAppOwnershipType: String?
    public var appAccountToken: String?
    public var quantity: Int32?

    public init(
        originalTransactionId: String? = nil, transactionId: String? = nil, productId: String? = nil,
        purchaseDate: EpochMilliseconds? = nil, originalPurchaseDate: EpochMilliseconds? = nil,
        expiresDate: EpochMilliseconds? = nil, cancellationDate: EpochMilliseconds? = nil,
        rawCancellationReason: Int32? = nil, isTrialPeriod: Bool? = nil,
        isInIntroOfferPeriod: Bool? = nil, isUpgraded: Bool? = nil,
        promotionalOfferId: String? = nil, offerCodeRefName: String? = nil,
        webOrderLineItemId: String? = nil, subscriptionGroupIdentifier: String? = nil,
        rawInAppOwnershipType: String? = nil, appAccountToken: String? = nil, quantity: Int32? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.cancellationDate = cancellationDate
        self.rawCancellationReason = rawCancellationReason
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.isUpgraded = isUpgraded
        self.promotionalOfferId = promotionalOfferId
        self.offerCodeRefName = offerCodeRefName
        self.webOrderLineItemId = webOrderLineItemId
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.rawInAppOwnershipType = rawInAppOwnershipType
        self.appAccountToken = appAccountToken
        self.quantity = quantity
    }

    public enum CodingKeys: String, CodingKey {
        case originalTransactionId = "original_transaction_id"
        case transactionId = "transaction_id"
        case productId = "product_id"
        case purchaseDate = "purchase_date_ms"
        case originalPurchaseDate = "original_purchase_date_ms"
        case expiresDate = "expires_date_ms"
        case cancellationDate = "cancellation_date_ms"
        case rawCancellationReason = "cancellation_reason"
        case isTrialPeriod = "is_trial_period"
        case isInIntroOfferPeriod = "is_in_intro_offer_period"
        case isUpgraded = "is_upgraded"
        case promotionalOfferId = "promotional_offer_id"
        case offerCodeRefName = "offer_code_ref_name"
        case webOrderLineItemId = "web_order_line_item_id"
        case subscriptionGroupIdentifier = "subscription_group_identifier"
        case rawInAppOwnershipType = "in_app_ownership_type"
        case appAccountToken = "app_account_token"
        case quantity
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = try c.decodeIfPresent(String.self, forKey: .originalTransactionId)
        transactionId = try c.decodeIfPresent(String.self, forKey: .transactionId)
        productId = try c.decodeIfPresent(String.self, forKey: .productId)
        purchaseDate = try c.decodeLegacyDate(.purchaseDate)
        originalPurchaseDate = try c.decodeLegacyDate(.originalPurchaseDate)
        expiresDate = try c.decodeLegacyDate(.expiresDate)
        cancellationDate = try c.decodeLegacyDate(.cancellationDate)
        rawCancellationReason = try c.decodeLegacyInt32(.rawCancellationReason)
        isTrialPeriod = try c.decodeLegacyBool(.isTrialPeriod)
        isInIntroOfferPeriod = try c.decodeLegacyBool(.isInIntroOfferPeriod)
        isUpgraded = try c.decodeLegacyBool(.isUpgraded)
        promotionalOfferId = try c.decodeIfPresent(String.self, forKey: .promotionalOfferId)
        offerCodeRefName = try c.decodeIfPresent(String.self, forKey: .offerCodeRefName)
        webOrderLineItemId = try c.decodeIfPresent(String.self, forKey: .webOrderLineItemId)
        subscriptionGroupIdentifier = try c.decodeIfPresent(String.self, forKey: .subscriptionGroupIdentifier)
        rawInAppOwnershipType = try c.decodeIfPresent(String.self, forKey: .rawInAppOwnershipType)
        appAccountToken = try c.decodeIfPresent(String.self, forKey: .appAccountToken)
        quantity = try c.decodeLegacyInt32(.quantity)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(originalTransactionId, forKey: .originalTransactionId)
        try c.encodeIfPresent(transactionId, forKey: .transactionId)
        try c.encodeIfPresent(productId, forKey: .productId)
        try c.encodeLegacy(purchaseDate, forKey: .purchaseDate)
        try c.encodeLegacy(originalPurchaseDate, forKey: .originalPurchaseDate)
        try c.encodeLegacy(expiresDate, forKey: .expiresDate)
        try c.encodeLegacy(cancellationDate, forKey: .cancellationDate)
        try c.encodeLegacy(rawCancellationReason, forKey: .rawCancellationReason)
        try c.encodeLegacy(isTrialPeriod, style: .word, forKey: .isTrialPeriod)
        try c.encodeLegacy(isInIntroOfferPeriod, style: .word, forKey: .isInIntroOfferPeriod)
        try c.encodeLegacy(isUpgraded, style: .word, forKey: .isUpgraded)
        try c.encodeIfPresent(promotionalOfferId, forKey: .promotionalOfferId)
        try c.encodeIfPresent(offerCodeRefName, forKey: .offerCodeRefName)
        try c.encodeIfPresent(webOrderLineItemId, forKey: .webOrderLineItemId)
        try c.encodeIfPresent(subscriptionGroupIdentifier, forKey: .subscriptionGroupIdentifier)
        try c.encodeIfPresent(rawInAppOwnershipType, forKey: .rawInAppOwnershipType)
        try c.encodeIfPresent(appAccountToken, forKey: .appAccountToken)
        try c.encodeLegacy(quantity, forKey: .quantity)
    }

    public var cancellationReason: RevocationReason? {
        get { rawCancellationReason.flatMap(RevocationReason.init(rawValue:)) }
        set { rawCancellationReason = newValue?.rawValue }
    }
    public var inAppOwnershipType: InAppOwnershipType? {
        get { rawInAppOwnershipType.flatMap(InAppOwnershipType.init(rawValue:)) }
        set { rawInAppOwnershipType = newValue?.rawValue }
    }
}
