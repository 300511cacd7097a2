import AppStoreModels
import Foundation

/// jsonb form: snake_case keys that never change meaning, dates as Int64 milliseconds since
/// 1970 (independent of the encoder's date strategy), absent values omitted, plus `version`
/// and the derived `unknown_values` for readers in SQL. Decoding ignores `unknown_values`
/// (it is recomputed) and tolerates missing optional keys.
extension SubscriptionSnapshot: Codable {
    /// The version of the jsonb layout.
    public static let encodingVersion = 1

    private enum CodingKeys: String, CodingKey {
        case version
        case originalTransactionId = "original_transaction_id"
        case transactionId = "transaction_id"
        case webOrderLineItemId = "web_order_line_item_id"
        case bundleId = "bundle_id"
        case productId = "product_id"
        case subscriptionGroupIdentifier = "subscription_group_identifier"
        case rawType = "type"
        case state
        case rawStatus = "status"
        case originalPurchaseDate = "original_purchase_date_ms"
        case periodStart = "period_start_ms"
        case periodEnd = "period_end_ms"
        case rawAutoRenewStatus = "auto_renew_status"
        case autoRenewProductId = "auto_renew_product_id"
        case isInBillingRetryPeriod = "is_in_billing_retry_period"
        case gracePeriodExpiresDate = "grace_period_expires_date_ms"
        case rawExpirationIntent = "expiration_intent"
        case rawPriceIncreaseStatus = "price_increase_status"
        case renewalDate = "renewal_date_ms"
        case renewalPrice = "renewal_price"
        case renewalCurrency = "renewal_currency"
        case rawRenewalOfferType = "renewal_offer_type"
        case renewalOfferIdentifier = "renewal_offer_identifier"
        case rawRenewalOfferDiscountType = "renewal_offer_discount_type"
        case eligibleWinBackOfferIds = "eligible_win_back_offer_ids"
        case recentSubscriptionStartDate = "recent_subscription_start_date_ms"
        case hasRenewalInfo = "has_renewal_info"
        case revocationDate = "revocation_date_ms"
        case rawRevocationReason = "revocation_reason"
        case rawRevocationType = "revocation_type"
        case rawOfferType = "offer_type"
        case offerIdentifier = "offer_identifier"
        case rawOfferDiscountType = "offer_discount_type"
        case isUpgraded = "is_upgraded"
        case upgradedFromProductId = "upgraded_from_product_id"
        case rawTransactionReason = "transaction_reason"
        case rawOwnershipType = "in_app_ownership_type"
        case rawEnvironment = "environment"
        case price
        case currency
        case appAccountToken = "app_account_token"
        case signedDate = "signed_date_ms"
        case unknownValues = "unknown_values"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionId = try c.decode(String.self, forKey: .originalTransactionId)
        transactionId = try c.decode(String.self, forKey: .transactionId)
        webOrderLineItemId = try c.decodeIfPresent(String.self, forKey: .webOrderLineItemId)
        bundleId = try c.decodeIfPresent(String.self, forKey: .bundleId)
        productId = try c.decode(String.self, forKey: .productId)
        subscriptionGroupIdentifier = try c.decodeIfPresent(String.self, forKey: .subscriptionGroupIdentifier)
        rawType = try c.decodeIfPresent(String.self, forKey: .rawType)
        // A state written by a newer version decodes as unknown rather than failing.
        state = try c.decodeIfPresent(String.self, forKey: .state).flatMap(SubscriptionState.init(rawValue:)) ?? .unknown
        rawStatus = try c.decodeIfPresent(Int.self, forKey: .rawStatus)
        originalPurchaseDate = try c.decodeMilliseconds(forKey: .originalPurchaseDate)
        periodStart = try c.decodeMilliseconds(forKey: .periodStart)
        periodEnd = try c.decodeMilliseconds(forKey: .periodEnd)
        rawAutoRenewStatus = try c.decodeIfPresent(Int.self, forKey: .rawAutoRenewStatus)
        autoRenewProductId = try c.decodeIfPresent(String.self, forKey: .autoRenewProductId)
        isInBillingRetryPeriod = try c.decodeIfPresent(Bool.self, forKey: .isInBillingRetryPeriod)
        gracePeriodExpiresDate = try c.decodeMilliseconds(forKey: .gracePeriodExpiresDate)
        rawExpirationIntent = try c.decodeIfPresent(Int.self, forKey: .rawExpirationIntent)
        rawPriceIncreaseStatus = try c.decodeIfPresent(Int.self, forKey: .rawPriceIncreaseStatus)
        renewalDate = try c.decodeMilliseconds(forKey: .renewalDate)
        renewalPrice = try c.decodeIfPresent(Int64.self, forKey: .renewalPrice)
        renewalCurrency = try c.decodeIfPresent(String.self, forKey: .renewalCurrency)
        rawRenewalOfferType = try c.decodeIfPresent(Int.self, forKey: .rawRenewalOfferType)
        renewalOfferIdentifier = try c.decodeIfPresent(String.self, forKey: .renewalOfferIdentifier)
        rawRenewalOfferDiscountType = try c.decodeIfPresent(String.self, forKey: .rawRenewalOfferDiscountType)
        eligibleWinBackOfferIds = try c.decodeIfPresent([String].self, forKey: .eligibleWinBackOfferIds) ?? []
        recentSubscriptionStartDate = try c.decodeMilliseconds(forKey: .recentSubscriptionStartDate)
        hasRenewalInfo = try c.decodeIfPresent(Bool.self, forKey: .hasRenewalInfo) ?? false
        revocationDate = try c.decodeMilliseconds(forKey: .revocationDate)
        rawRevocationReason = try c.decodeIfPresent(Int.self, forKey: .rawRevocationReason)
        rawRevocationType = try c.decodeIfPresent(String.self, forKey: .rawRevocationType)
        rawOfferType = try c.decodeIfPresent(Int.self, forKey: .rawOfferType)
        offerIdentifier = try c.decodeIfPresent(String.self, forKey: .offerIdentifier)
        rawOfferDiscountType = try c.decodeIfPresent(String.self, forKey: .rawOfferDiscountType)
        isUpgraded = try c.decodeIfPresent(Bool.self, forKey: .isUpgraded)
        upgradedFromProductId = try c.decodeIfPresent(String.self, forKey: .upgradedFromProductId)
        rawTransactionReason = try c.decodeIfPresent(String.self, forKey: .rawTransactionReason)
        rawOwnershipType = try c.decodeIfPresent(String.self, forKey: .rawOwnershipType)
        rawEnvironment = try c.decodeIfPresent(String.self, forKey: .rawEnvironment)
        price = try c.decodeIfPresent(Int64.self, forKey: .price)
        currency = try c.decodeIfPresent(String.self, forKey: .currency)
        appAccountToken = try c.decodeIfPresent(String.self, forKey: .appAccountToken)
        signedDate = try c.decodeMilliseconds(forKey: .signedDate)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Self.encodingVersion, forKey: .version)
        try c.encode(originalTransactionId, forKey: .originalTransactionId)
        try c.encode(transactionId, forKey: .transactionId)
        try c.encodeIfPresent(webOrderLineItemId, forKey: .webOrderLineItemId)
        try c.encodeIfPresent(bundleId, forKey: .bundleId)
        try c.encode(productId, forKey: .productId)
        try c.encodeIfPresent(subscriptionGroupIdentifier, forKey: .subscriptionGroupIdentifier)
        try c.encodeIfPresent(rawType, forKey: .rawType)
        try c.encode(state.rawValue, forKey: .state)
        try c.encodeIfPresent(rawStatus, forKey: .rawStatus)
        try c.encodeMilliseconds(originalPurchaseDate, forKey: .originalPurchaseDate)
        try c.encodeMilliseconds(periodStart, forKey: .periodStart)
        try c.encodeMilliseconds(periodEnd, forKey: .periodEnd)
        try c.encodeIfPresent(rawAutoRenewStatus, forKey: .rawAutoRenewStatus)
        try c.encodeIfPresent(autoRenewProductId, forKey: .autoRenewProductId)
        try c.encodeIfPresent(isInBillingRetryPeriod, forKey: .isInBillingRetryPeriod)
        try c.encodeMilliseconds(gracePeriodExpiresDate, forKey: .gracePeriodExpiresDate)
        try c.encodeIfPresent(rawExpirationIntent, forKey: .rawExpirationIntent)
        try c.encodeIfPresent(rawPriceIncreaseStatus, forKey: .rawPriceIncreaseStatus)
        try c.encodeMilliseconds(renewalDate, forKey: .renewalDate)
        try c.encodeIfPresent(renewalPrice, forKey: .renewalPrice)
        try c.encodeIfPresent(renewalCurrency, forKey: .renewalCurrency)
        try c.encodeIfPresent(rawRenewalOfferType, forKey: .rawRenewalOfferType)
        try c.encodeIfPresent(renewalOfferIdentifier, forKey: .renewalOfferIdentifier)
        try c.encodeIfPresent(rawRenewalOfferDiscountType, forKey: .rawRenewalOfferDiscountType)
        try c.encode(eligibleWinBackOfferIds, forKey: .eligibleWinBackOfferIds)
        try c.encodeMilliseconds(recentSubscriptionStartDate, forKey: .recentSubscriptionStartDate)
        try c.encode(hasRenewalInfo, forKey: .hasRenewalInfo)
        try c.encodeMilliseconds(revocationDate, forKey: .revocationDate)
        try c.encodeIfPresent(rawRevocationReason, forKey: .rawRevocationReason)
        try c.encodeIfPresent(rawRevocationType, forKey: .rawRevocationType)
        try c.encodeIfPresent(rawOfferType, forKey: .rawOfferType)
        try c.encodeIfPresent(offerIdentifier, forKey: .offerIdentifier)
        try c.encodeIfPresent(rawOfferDiscountType, forKey: .rawOfferDiscountType)
        try c.encodeIfPresent(isUpgraded, forKey: .isUpgraded)
        try c.encodeIfPresent(upgradedFromProductId, forKey: .upgradedFromProductId)
        try c.encodeIfPresent(rawTransactionReason, forKey: .rawTransactionReason)
        try c.encodeIfPresent(rawOwnershipType, forKey: .rawOwnershipType)
        try c.encodeIfPresent(rawEnvironment, forKey: .rawEnvironment)
        try c.encodeIfPresent(price, forKey: .price)
        try c.encodeIfPresent(currency, forKey: .currency)
        try c.encodeIfPresent(appAccountToken, forKey: .appAccountToken)
        try c.encodeMilliseconds(signedDate, forKey: .signedDate)
        let unknown = unknownValues
        if !unknown.isEmpty { try c.encode(unknown, forKey: .unknownValues) }
    }
}
