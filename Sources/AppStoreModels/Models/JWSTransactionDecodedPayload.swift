import Foundation

/// The decoded payload of a signed transaction (`signedTransactionInfo`, `signedTransactions[]`).
///
/// Field names are Apple's. Dates are ``EpochMilliseconds``; prices are milliunits (10990 = 10.99).
/// Every enumerated field is stored raw (`rawType`, `rawEnvironment`, ...) with a typed accessor
/// that is `nil` for a value this version does not know. Unknown JSON fields are ignored.
///
/// [JWSTransactionDecodedPayload](https://developer.apple.com/documentation/appstoreserverapi/jwstransactiondecodedpayload)
public struct JWSTransactionDecodedPayload: Codable, Hashable, Sendable {
    /// ID of this purchase, restore or renewal.
    public var transactionId: String?
    /// ID of the first purchase; stable across renewals.
    public var originalTransactionId: String?
    /// Purchase-event ID, the same across devices; a new one per renewal.
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    /// When the App Store charged the account (purchase, restore, renewal, resubscribe).
    public var purchaseDate: EpochMilliseconds?
    /// Purchase date of the original transaction.
    public var originalPurchaseDate: EpochMilliseconds?
    /// When this subscription period expires or renews.
    public var expiresDate: EpochMilliseconds?
    /// Number of consumables purchased.
    public var quantity: Int32?
    /// Raw `type`, e.g. `Auto-Renewable Subscription`. See ``type``.
    public var rawType: String?
    /// The customer UUID the app set at purchase, as sent (Apple sends a UUID string). See ``appAccountTokenUUID``.
    public var appAccountToken: String?
    /// Raw `inAppOwnershipType`. See ``inAppOwnershipType``.
    public var rawInAppOwnershipType: String?
    /// When Apple signed the JWS.
    public var signedDate: EpochMilliseconds?
    /// Refund or family-revoke time; present only when revoked.
    public var revocationDate: EpochMilliseconds?
    /// Raw `revocationReason`. See ``revocationReason``.
    public var rawRevocationReason: Int32?
    /// Raw `revocationType`. See ``revocationType``.
    public var rawRevocationType: String?
    /// Refunded share in milliunits of a percent (0–100000).
    public var revocationPercentage: Int32?
    /// `true` when the customer upgraded away from this subscription.
    public var isUpgraded: Bool?
    /// Raw `offerType`. See ``offerType``.
    public var rawOfferType: Int32?
    /// Offer-code reference name or promotional / win-back offer ID.
    public var offerIdentifier: String?
    /// Raw `offerDiscountType`. See ``offerDiscountType``.
    public var rawOfferDiscountType: String?
    /// ISO 8601 duration of the offer, e.g. `P1M`.
    public var offerPeriod: String?
    /// Raw `environment`. See ``environment``.
    public var rawEnvironment: String?
    /// ISO 3166-1 alpha-3 country code, e.g. `USA`.
    public var storefront: String?
    /// Apple's storefront ID, e.g. `143441`.
    public var storefrontId: String?
    /// Raw `transactionReason`. See ``transactionReason``.
    public var rawTransactionReason: String?
    /// Price in milliunits of ``currency`` (10990 = 10.99).
    public var price: Int64?
    /// ISO 4217 currency code of ``price``.
    public var currency: String?
    public var appTransactionId: String?
    /// Raw `billingPlanType`. See ``billingPlanType``.
    public var rawBillingPlanType: String?
    public var commitmentInfo: TransactionCommitmentInfo?
    /// Original transaction ID before a subscription migration.
    public var previousOriginalTransactionId: String?
    /// Advanced Commerce API data, kept as received.
    public var advancedCommerceInfo: JSONValue?

    public init(
        transactionId: String? = nil, originalTransactionId: String? = nil,
        webOrderLineItemId: String? = nil, bundleId: String? = nil, productId: String? = nil,
        subscriptionGroupIdentifier: String? = nil, purchaseDate: EpochMilliseconds? = nil,
        originalPurchaseDate: EpochMilliseconds? = nil, expiresDate: EpochMilliseconds? = nil,
        quantity: Int32? = nil, rawType: String? = nil, appAccountToken: String? = nil,
        rawInAppOwnershipType: String? = nil, signedDate: EpochMilliseconds? = nil,
        revocationDate: EpochMilliseconds? = nil, rawRevocationReason: Int32? = nil,
        rawRevocationType: String? = nil, revocationPercentage: Int32? = nil,
        isUpgraded: Bool? = nil, rawOfferType: Int32? = nil, offerIdentifier: String? = nil,
        rawOfferDiscountType: String? = nil, offerPeriod: String? = nil,
        rawEnvironment: String? = nil, storefront: String? = nil, storefrontId: String? = nil,
        rawTransactionReason: String? = nil, price: Int64? = nil, currency: String? = nil,
        appTransactionId: String? = nil, rawBillingPlanType: String? = nil,
        commitmentInfo: TransactionCommitmentInfo? = nil,
        previousOriginalTransactionId: String? = nil, advancedCommerceInfo: JSONValue? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.webOrderLineItemId = webOrderLineItemId
        self.bundleId = bundleId
        self.productId = productId
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.rawType = rawType
        self.appAccountToken = appAccountToken
        self.rawInAppOwnershipType = rawInAppOwnershipType
        self.signedDate = signedDate
        self.revocationDate = revocationDate
        self.rawRevocationReason = rawRevocationReason
        self.rawRevocationType = rawRevocationType
        self.revocationPercentage = revocationPercentage
        self.isUpgraded = isUpgraded
        self.rawOfferType = rawOfferType
        self.offerIdentifier = offerIdentifier
        self.rawOfferDiscountType = rawOfferDiscountType
        self.offerPeriod = offerPeriod
        self.rawEnvironment = rawEnvironment
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.rawTransactionReason = rawTransactionReason
        self.price = price
        self.currency = currency
        self.appTransactionId = appTransactionId
        self.rawBillingPlanType = rawBillingPlanType
        self.commitmentInfo = commitmentInfo
        self.previousOriginalTransactionId = previousOriginalTransactionId
        self.advancedCommerceInfo = advancedCommerceInfo
    }

    public enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, webOrderLineItemId, bundleId, productId
        case subscriptionGroupIdentifier, purchaseDate, originalPurchaseDate, expiresDate, quantity
        case rawType = "type"
        case appAccountToken
        case rawInAppOwnershipType = "inAppOwnershipType"
        case signedDate, revocationDate
        case rawRevocationReason = "revocationReason"
        case rawRevocationType = "revocationType"
        case revocationPercentage, isUpgraded
        case rawOfferType = "offerType"
        case offerIdentifier
        case rawOfferDiscountType = "offerDiscountType"
        case offerPeriod
        case rawEnvironment = "environment"
        case storefront, storefrontId
        case rawTransactionReason = "transactionReason"
        case price, currency, appTransactionId
        case rawBillingPlanType = "billingPlanType"
        case commitmentInfo, previousOriginalTransactionId, advancedCommerceInfo
    }
}

extension JWSTransactionDecodedPayload {
    public var type: ProductType? {
        get { rawType.flatMap(ProductType.init(rawValue:)) }
        set { rawType = newValue?.rawValue }
    }
    public var inAppOwnershipType: InAppOwnershipType? {
        get { rawInAppOwnershipType.flatMap(InAppOwnershipType.init(rawValue:)) }
        set { rawInAppOwnershipType = newValue?.rawValue }
    }
    public var revocationReason: RevocationReason? {
        get { rawRevocationReason.flatMap(RevocationReason.init(rawValue:)) }
        set { rawRevocationReason = newValue?.rawValue }
    }
    public var revocationType: RevocationType? {
        get { rawRevocationType.flatMap(RevocationType.init(rawValue:)) }
        set { rawRevocationType = newValue?.rawValue }
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
    public var transactionReason: TransactionReason? {
        get { rawTransactionReason.flatMap(TransactionReason.init(rawValue:)) }
        set { rawTransactionReason = newValue?.rawValue }
    }
    public var billingPlanType: BillingPlanType? {
        get { rawBillingPlanType.flatMap(BillingPlanType.init(rawValue:)) }
        set { rawBillingPlanType = newValue?.rawValue }
    }
    /// ``appAccountToken`` parsed as a UUID; `nil` when absent or not a UUID.
    public var appAccountTokenUUID: UUID? { appAccountToken.flatMap(UUID.init(uuidString:)) }
}
