import AppStoreModels
import ChurnModel
import Foundation

/// Apple's decoded payloads, mapped into the churn model's facts (field for field).
extension TransactionFacts {
    /// nil when the payload lacks the ids or product every transaction has.
    init?(_ p: JWSTransactionDecodedPayload) {
        guard let otid = p.originalTransactionId, let tid = p.transactionId, let product = p.productId else { return nil }
        self.init(
            originalTransactionId: otid, transactionId: tid, webOrderLineItemId: p.webOrderLineItemId,
            bundleId: p.bundleId, productId: product, subscriptionGroupIdentifier: p.subscriptionGroupIdentifier,
            purchaseDate: p.purchaseDate?.date, originalPurchaseDate: p.originalPurchaseDate?.date,
            expiresDate: p.expiresDate?.date, type: p.rawType, inAppOwnershipType: p.rawInAppOwnershipType,
            signedDate: p.signedDate?.date, revocationDate: p.revocationDate?.date,
            revocationReason: p.rawRevocationReason.map(Int.init), revocationType: p.rawRevocationType,
            isUpgraded: p.isUpgraded, offerType: p.rawOfferType.map(Int.init), offerIdentifier: p.offerIdentifier,
            offerDiscountType: p.rawOfferDiscountType, environment: p.rawEnvironment,
            transactionReason: p.rawTransactionReason, price: p.price, currency: p.currency,
            appAccountToken: p.appAccountToken)
    }

    /// One element of a legacy `latest_receipt_info`.
    init?(legacy t: LegacyReceiptTransaction, environment: String) {
        guard let otid = t.originalTransactionId, let tid = t.transactionId, let product = t.productId else { return nil }
        let offerType: Int? = t.promotionalOfferId != nil ? 2 : (t.offerCodeRefName != nil ? 3 : ((t.isTrialPeriod == true || t.isInIntroOfferPeriod == true) ? 1 : nil))
        self.init(
            originalTransactionId: otid, transactionId: tid, webOrderLineItemId: t.webOrderLineItemId,
            bundleId: nil, productId: product, subscriptionGroupIdentifier: t.subscriptionGroupIdentifier,
            purchaseDate: t.purchaseDate?.date, originalPurchaseDate: t.originalPurchaseDate?.date,
            expiresDate: t.expiresDate?.date, type: "Auto-Renewable Subscription",
            inAppOwnershipType: t.rawInAppOwnershipType, signedDate: nil,
            revocationDate: t.cancellationDate?.date, revocationReason: t.rawCancellationReason.map(Int.init),
            revocationType: nil, isUpgraded: t.isUpgraded, offerType: offerType,
            offerIdentifier: t.promotionalOfferId ?? t.offerCodeRefName,
            offerDiscountType: t.isTrialPeriod == true ? "FREE_TRIAL" : nil, environment: environment,
            transactionReason: nil, price: nil, currency: nil, appAccountToken: t.appAccountToken)
    }
}

extension RenewalFacts {
    init?(_ p: JWSRenewalInfoDecodedPayload, originalTransactionId fallback: String) {
        self.init(
            originalTransactionId: p.originalTransactionId ?? fallback, autoRenewProductId: p.autoRenewProductId,
            productId: p.productId, autoRenewStatus: p.rawAutoRenewStatus.map(Int.init),
            isInBillingRetryPeriod: p.isInBillingRetryPeriod, gracePeriodExpiresDate: p.gracePeriodExpiresDate?.date,
            expirationIntent: p.rawExpirationIntent.map(Int.init), priceIncreaseStatus: p.rawPriceIncreaseStatus.map(Int.init),
            offerType: p.rawOfferType.map(Int.init), offerIdentifier: p.offerIdentifier,
            offerDiscountType: p.rawOfferDiscountType, renewalDate: p.renewalDate?.date, renewalPrice: p.renewalPrice,
            currency: p.currency, eligibleWinBackOfferIds: p.eligibleWinBackOfferIds, signedDate: p.signedDate?.date,
            recentSubscriptionStartDate: p.recentSubscriptionStartDate?.date, environment: p.rawEnvironment)
    }

    /// One element of a legacy `pending_renewal_info`.
    init(legacy r: LegacyPendingRenewalInfo, originalTransactionId fallback: String, environment: String) {
        // price_consent_status "0" pending / "1" consented maps onto priceIncreaseStatus 0 / 1.
        let priceIncrease = r.rawPriceIncreaseStatus ?? r.priceConsentStatus
        self.init(
            originalTransactionId: r.originalTransactionId ?? fallback, autoRenewProductId: r.autoRenewProductId,
            productId: r.productId, autoRenewStatus: r.rawAutoRenewStatus.map(Int.init),
            isInBillingRetryPeriod: r.isInBillingRetryPeriod, gracePeriodExpiresDate: r.gracePeriodExpiresDate?.date,
            expirationIntent: r.rawExpirationIntent.map(Int.init), priceIncreaseStatus: priceIncrease.map(Int.init),
            offerType: nil, offerIdentifier: r.promotionalOfferId ?? r.offerCodeRefName, offerDiscountType: nil,
            renewalDate: nil, renewalPrice: nil, currency: nil, eligibleWinBackOfferIds: nil, signedDate: nil,
            recentSubscriptionStartDate: nil, environment: environment)
    }
}
