import Foundation

/// One decoded subscription transaction: Apple's `JWSTransactionDecodedPayload`, or one element
/// of a legacy `latest_receipt_info`. Property names are Apple's JSON field names.
///
/// Enumerations are kept raw (an unknown value must survive); typed views live on
/// `SubscriptionSnapshot`. `Codable` uses Apple's keys with dates as Int64 milliseconds since
/// 1970, so a decoded JWS payload decodes straight into this type (unknown keys are ignored).
public struct TransactionFacts: Sendable, Equatable, Hashable, Codable {
    /// ID of the first purchase; the subscription's key.
    public var originalTransactionId: String
    /// ID of this purchase, restore or renewal.
    public var transactionId: String
    /// Purchase-event ID; a new one per renewal.
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String
    public var subscriptionGroupIdentifier: String?
    /// Time of the charge (purchase, renewal, resubscribe, upgrade): the start of this period.
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    /// When this period expires or renews.
    public var expiresDate: Date?
    /// Raw `type`, e.g. `Auto-Renewable Subscription` (`ProductType`).
    public var type: String?
    /// Raw `inAppOwnershipType` (`InAppOwnershipType`).
    public var inAppOwnershipType: String?
    /// When Apple signed the payload; nil on the legacy receipt path.
    public var signedDate: Date?
    /// Refund or family-revoke time; present only while revoked.
    public var revocationDate: Date?
    /// Raw `revocationReason` (`RevocationReason`).
    public var revocationReason: Int?
    /// Raw `revocationType` (`RevocationType`).
    public var revocationType: String?
    /// True on a transaction the customer upgraded away from.
    public var isUpgraded: Bool?
    /// Raw `offerType` (`OfferType`).
    public var offerType: Int?
    public var offerIdentifier: String?
    /// Raw `offerDiscountType` (`OfferDiscountType`).
    public var offerDiscountType: String?
    /// Raw `environment` (`AppStoreEnvironment`).
    public var environment: String?
    /// Raw `transactionReason` (`TransactionReason`); nil on the legacy path.
    public var transactionReason: String?
    /// Price in milliunits (10990 = 10.99).
    public var price: Int64?
    /// ISO 4217 code for `price`.
    public var currency: String?
    /// The app's customer UUID, as Apple sends it.
    public var appAccountToken: String?

    public init(
        originalTransactionId: String,
        transactionId: String,
        webOrderLineItemId: String? = nil,
        bundleId: String? = nil,
        productId: String,
        subscriptionGroupIdentifier: String? = nil,
        purchaseDate: Date? = nil,
        originalPurchaseDate: Date? = nil,
        expiresDate: Date? = nil,
        type: String? = nil,
        inAppOwnershipType: String? = nil,
        signedDate: Date? = nil,
        revocationDate: Date? = nil,
        revocationReason: Int? = nil,
        revocationType: String? = nil,
        isUpgraded: Bool? = nil,
        offerType: Int? = nil,
        offerIdentifier: String? = nil,
        offerDiscountType: String? = nil,
        environment: String? = nil,
        transactionReason: String? = nil,
        price: Int64? = nil,
        currency: String? = nil,
        appAccountToken: String? = nil
    ) {
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.webOrderLineItemId = webOrderLineItemId
        self.bundleId = bundleId
        self.productId = productId
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.type = type
        self.inAppOwnershipType = inAppOwnershipType
        self.signedDate = signedDate
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.isUpgraded = isUpgraded
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.environment = environment
        self.transactionReason = transactionReason
        self.price = price
        self.currency = currency
        self.appAccountToken = appAccountToken
    }

    private enum CodingKeys: String, CodingKey {
        case originalTransactionId, transactionId, webOrderLineItemId, bundleId, productId
        case subscriptionGroupIdentifier, purchaseDate, originalPurchaseDate, expiresDate, type
        case inAppOwnershipType, signedDate, revocationDate, revocationReason, revocationType
        case isUpgraded, offerType, offerIdentifier, offerDiscountType, environment
        case transactionReason, price, currency, appAccountToken
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = try c.decode(String.self, forKey: .originalTransactionId)
        transactionId = try c.decode(String.self, forKey: .transactionId)
        webOrderLineItemId = try c.decodeIfPresent(String.self, forKey: .webOrderLineItemId)
        bundleId = try c.decodeIfPresent(String.self, forKey: .bundleId)
        productId = try c.decode(String.self, forKey: .productId)
        subscriptionGroupIdentifier = try c.decodeIfPresent(String.self, forKey: .subscriptionGroupIdentifier)
        purchaseDate = try c.decodeMilliseconds(forKey: .purchaseDate)
        originalPurchaseDate = try c.decodeMilliseconds(forKey: .originalPurchaseDate)
        expiresDate = try c.decodeMilliseconds(forKey: .expiresDate)
        type = try c.decodeIfPresent(String.self, forKey: .type)
        inAppOwnershipType = try c.decodeIfPresent(String.self, forKey: .inAppOwnershipType)
        signedDate = try c.decodeMilliseconds(forKey: .signedDate)
        revocationDate = try c.decodeMilliseconds(forKey: .revocationDate)
        revocationReason = try c.decodeIfPresent(Int.self, forKey: .revocationReason)
        revocationType = try c.decodeIfPresent(String.self, forKey: .revocationType)
        isUpgraded = try c.decodeIfPresent(Bool.self, forKey: .isUpgraded)
        offerType = try c.decodeIfPresent(Int.self, forKey: .offerType)
        offerIdentifier = try c.decodeIfPresent(String.self, forKey: .offerIdentifier)
        offerDiscountType = try c.decodeIfPresent(String.self, forKey: .offerDiscountType)
        environment = try c.decodeIfPresent(String.self, forKey: .environment)
        transactionReason = try c.decodeIfPresent(String.self, forKey: .transactionReason)
        price = try c.decodeIfPresent(Int64.self, forKey: .price)
        currency = try c.decodeIfPresent(String.self, forKey: .currency)
        appAccountToken = try c.decodeIfPresent(String.self, forKey: .appAccountToken)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(originalTransactionId, forKey: .originalTransactionId)
        try c.encode(transactionId, forKey: .transactionId)
        try c.encodeIfPresent(webOrderLineItemId, forKey: .webOrderLineItemId)
        try c.encodeIfPresent(bundleId, forKey: .bundleId)
        try c.encode(productId, forKey: .productId)
        try c.encodeIfPresent(subscriptionGroupIdentifier, forKey: .subscriptionGroupIdentifier)
        try c.encodeMilliseconds(purchaseDate, forKey: .purchaseDate)
        try c.encodeMilliseconds(originalPurchaseDate, forKey: .originalPurchaseDate)
        try c.encodeMilliseconds(expiresDate, forKey: .expiresDate)
        try c.encodeIfPresent(type, forKey: .type)
        try c.encodeIfPresent(inAppOwnershipType, forKey: .inAppOwnershipType)
        try c.encodeMilliseconds(signedDate, forKey: .signedDate)
        try c.encodeMilliseconds(revocationDate, forKey: .revocationDate)
        try c.encodeIfPresent(revocationReason, forKey: .revocationReason)
        try c.encodeIfPresent(revocationType, forKey: .revocationType)
        try c.encodeIfPresent(isUpgraded, forKey: .isUpgraded)
        try c.encodeIfPresent(offerType, forKey: .offerType)
        try c.encodeIfPresent(offerIdentifier, forKey: .offerIdentifier)
        try c.encodeIfPresent(offerDiscountType, forKey: .offerDiscountType)
        try c.encodeIfPresent(environment, forKey: .environment)
        try c.encodeIfPresent(transactionReason, forKey: .transactionReason)
        try c.encodeIfPresent(price, forKey: .price)
        try c.encodeIfPresent(currency, forKey: .currency)
        try c.encodeIfPresent(appAccountToken, forKey: .appAccountToken)
    }
}
