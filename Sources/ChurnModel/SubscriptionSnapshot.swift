import AppStoreModels
import Foundation

/// The normalized state of one subscription (one `originalTransactionId`) as verified at one
/// poll. Built from Apple's answer (status + latest signed transaction + signed renewal info,
/// plus history when fetched) or from a legacy verifyReceipt answer (no status: it is derived
/// from the facts at `asOf`).
///
/// Every Apple enumeration is kept as its raw value (`raw*`) beside a typed view that is nil
/// for a value this version doesn't know; such values are listed in `unknownValues`, never
/// dropped. Stored as jsonb: `Codable` with stable snake_case keys and dates as Int64
/// milliseconds since 1970, independent of the encoder's date strategy.
public struct SubscriptionSnapshot: Sendable, Equatable, Hashable {
    // MARK: Identity

    /// Apple's subscription key.
    public var originalTransactionId: String
    /// The transaction that determines the current period.
    public var transactionId: String
    /// Purchase-event ID of the current period (new per renewal).
    public var webOrderLineItemId: String?
    public var bundleId: String?
    /// The product of the current period.
    public var productId: String
    public var subscriptionGroupIdentifier: String?
    /// Raw `type` (`ProductType`).
    public var rawType: String?

    // MARK: Status

    /// The normalized state.
    public var state: SubscriptionState
    /// Apple's raw status (1–5 or a value not known yet); on the legacy path, the status derived
    /// from the facts at `asOf`; nil when none could be derived.
    public var rawStatus: Int?

    // MARK: Period

    public var originalPurchaseDate: Date?
    /// Start of the current period: the charge (`purchaseDate`) of its transaction. After a
    /// billing recovery this is the recovery date.
    public var periodStart: Date?
    /// End of the current period (`expiresDate`).
    public var periodEnd: Date?

    // MARK: Renewal

    /// Raw `autoRenewStatus` (`AutoRenewStatus`); nil without renewal info.
    public var rawAutoRenewStatus: Int?
    /// The product it renews into.
    public var autoRenewProductId: String?
    public var isInBillingRetryPeriod: Bool?
    public var gracePeriodExpiresDate: Date?
    /// Raw `expirationIntent` (`ExpirationIntent`).
    public var rawExpirationIntent: Int?
    /// Raw `priceIncreaseStatus` (`PriceIncreaseStatus`).
    public var rawPriceIncreaseStatus: Int?
    /// The next renewal (`renewalDate`).
    public var renewalDate: Date?
    /// Next renewal price in milliunits.
    public var renewalPrice: Int64?
    /// ISO 4217 code for `renewalPrice`.
    public var renewalCurrency: String?
    /// Raw `offerType` that applies at the next renewal.
    public var rawRenewalOfferType: Int?
    public var renewalOfferIdentifier: String?
    /// Raw `offerDiscountType` that applies at the next renewal.
    public var rawRenewalOfferDiscountType: String?
    /// Apple's `eligibleWinBackOfferIds`, best first; empty when absent.
    public var eligibleWinBackOfferIds: [String]
    public var recentSubscriptionStartDate: Date?
    /// Whether renewal info was present (it is absent, e.g., after a cancel during grace on the
    /// legacy path).
    public var hasRenewalInfo: Bool

    // MARK: Revocation

    /// Refund or family-revoke time of the current transaction.
    public var revocationDate: Date?
    /// Raw `revocationReason` (`RevocationReason`).
    public var rawRevocationReason: Int?
    /// Raw `revocationType` (`RevocationType`).
    public var rawRevocationType: String?

    // MARK: Offer, ownership, origin

    /// Raw `offerType` in effect for the current period (`OfferType`).
    public var rawOfferType: Int?
    public var offerIdentifier: String?
    /// Raw `offerDiscountType` in effect for the current period (`OfferDiscountType`).
    public var rawOfferDiscountType: String?
    /// True when the current transaction was upgraded away from.
    public var isUpgraded: Bool?
    /// The product the customer upgraded away from into this period, when the history shows it
    /// (a transaction with `isUpgraded` whose period the current purchase cut short).
    public var upgradedFromProductId: String?
    /// Raw `transactionReason` (`TransactionReason`).
    public var rawTransactionReason: String?
    /// Raw `inAppOwnershipType` (`InAppOwnershipType`).
    public var rawOwnershipType: String?
    /// Raw `environment` (`AppStoreEnvironment`), from the transaction, else the renewal info.
    public var rawEnvironment: String?
    /// Price of the current period in milliunits.
    public var price: Int64?
    public var currency: String?
    public var appAccountToken: String?
    /// The newest `signedDate` of the transaction and the renewal info: how fresh Apple's
    /// answer is. Nil on the legacy path (nothing is signed there).
    public var signedDate: Date?

    /// Builds the snapshot of one subscription.
    ///
    /// - Parameters:
    ///   - status: Apple's raw status (1–5; an unknown value is kept and flagged). Nil for the
    ///     legacy receipt path: the status is then derived from the facts at `asOf` (revoked if
    ///     the transaction carries a revocation; active while `expiresDate` is in the future;
    ///     else grace while in billing retry and `gracePeriodExpiresDate` is in the future;
    ///     else billing retry while in billing retry; else expired).
    ///   - transaction: the latest transaction of the subscription.
    ///   - renewal: its renewal info, if any.
    ///   - history: the transaction history, when fetched; used to recognize an immediate
    ///     upgrade (`upgradedFromProductId`).
    ///   - asOf: the time of the poll; used only when `status` is nil.
    public init(
        status: Int?,
        transaction: TransactionFacts,
        renewal: RenewalFacts?,
        history: [TransactionFacts]? = nil,
        asOf: Date
    ) {
        let rawStatus = status
            ?? Self.derivedStatus(transaction: transaction, renewal: renewal, asOf: asOf)?.rawInt
        self.rawStatus = rawStatus
        if let known = rawStatus.flatMap({ SubscriptionStatus(rawInt: $0) }) {
            state = SubscriptionState(known)
        } else {
            state = .unknown
        }

        originalTransactionId = transaction.originalTransactionId
        transactionId = transaction.transactionId
        webOrderLineItemId = transaction.webOrderLineItemId
        bundleId = transaction.bundleId
        productId = transaction.productId
        subscriptionGroupIdentifier = transaction.subscriptionGroupIdentifier
        rawType = transaction.type

        originalPurchaseDate = transaction.originalPurchaseDate
        periodStart = transaction.purchaseDate
        periodEnd = transaction.expiresDate

        rawAutoRenewStatus = renewal?.autoRenewStatus
        autoRenewProductId = renewal?.autoRenewProductId
        isInBillingRetryPeriod = renewal?.isInBillingRetryPeriod
        gracePeriodExpiresDate = renewal?.gracePeriodExpiresDate
        rawExpirationIntent = renewal?.expirationIntent
        rawPriceIncreaseStatus = renewal?.priceIncreaseStatus
        renewalDate = renewal?.renewalDate
        renewalPrice = renewal?.renewalPrice
        renewalCurrency = renewal?.currency
        rawRenewalOfferType = renewal?.offerType
        renewalOfferIdentifier = renewal?.offerIdentifier
        rawRenewalOfferDiscountType = renewal?.offerDiscountType
        eligibleWinBackOfferIds = renewal?.eligibleWinBackOfferIds ?? []
        recentSubscriptionStartDate = renewal?.recentSubscriptionStartDate
        hasRenewalInfo = renewal != nil

        revocationDate = transaction.revocationDate
        rawRevocationReason = transaction.revocationReason
        rawRevocationType = transaction.revocationType

        rawOfferType = transaction.offerType
        offerIdentifier = transaction.offerIdentifier
        rawOfferDiscountType = transaction.offerDiscountType
        isUpgraded = transaction.isUpgraded
        upgradedFromProductId = history.flatMap { Self.upgradedFromProductId(into: transaction, history: $0) }
        rawTransactionReason = transaction.transactionReason
        rawOwnershipType = transaction.inAppOwnershipType
        rawEnvironment = transaction.environment ?? renewal?.environment
        price = transaction.price
        currency = transaction.currency
        appAccountToken = transaction.appAccountToken
        signedDate = [transaction.signedDate, renewal?.signedDate].compactMap { $0 }.max()
    }

    /// The status the legacy receipt path implies at `asOf` (see `init`); nil when the
    /// transaction has no `expiresDate` and no revocation.
    public static func derivedStatus(
        transaction: TransactionFacts,
        renewal: RenewalFacts?,
        asOf: Date
    ) -> SubscriptionStatus? {
        if transaction.revocationDate != nil { return .revoked }
        guard let expiresDate = transaction.expiresDate else { return nil }
        if expiresDate > asOf { return .active }
        if renewal?.isInBillingRetryPeriod == true {
            if let grace = renewal?.gracePeriodExpiresDate, grace > asOf { return .billingGracePeriod }
            return .billingRetry
        }
        return .expired
    }

    /// The transaction that determines a subscription's state among several (e.g. a legacy
    /// `latest_receipt_info`): of the given subscription's transactions not upgraded away from,
    /// the one with the latest `expiresDate`, then `purchaseDate`, then `transactionId`.
    public static func latestTransaction(
        of originalTransactionId: String,
        in transactions: [TransactionFacts]
    ) -> TransactionFacts? {
        transactions
            .filter { $0.originalTransactionId == originalTransactionId && $0.isUpgraded != true }
            .max { a, b in
                let ka = (a.expiresDate ?? .distantPast, a.purchaseDate ?? .distantPast)
                let kb = (b.expiresDate ?? .distantPast, b.purchaseDate ?? .distantPast)
                if ka != kb { return ka < kb }
                return a.transactionId < b.transactionId
            }
    }

    private static func upgradedFromProductId(
        into current: TransactionFacts,
        history: [TransactionFacts]
    ) -> String? {
        guard let purchased = current.purchaseDate else { return nil }
        return history
            .filter { old in
                old.originalTransactionId == current.originalTransactionId
                    && old.transactionId != current.transactionId
                    && old.isUpgraded == true
                    && old.productId != current.productId
                    && (old.purchaseDate ?? .distantFuture) <= purchased
                    && (old.expiresDate ?? .distantPast) >= purchased
            }
            .max { ($0.purchaseDate ?? .distantPast) < ($1.purchaseDate ?? .distantPast) }?
            .productId
    }
}

// MARK: - Typed views

extension SubscriptionSnapshot {
    /// Apple's status, if known.
    public var status: SubscriptionStatus? { rawStatus.flatMap(SubscriptionStatus.init(rawInt:)) }
    public var autoRenewStatus: AutoRenewStatus? { rawAutoRenewStatus.flatMap(AutoRenewStatus.init(rawInt:)) }
    /// True when auto-renew is on, false when off, nil when unknown or absent.
    public var autoRenew: Bool? { autoRenewStatus.map { $0 == .on } }
    public var expirationIntent: ExpirationIntent? { rawExpirationIntent.flatMap(ExpirationIntent.init(rawInt:)) }
    public var priceIncreaseStatus: PriceIncreaseStatus? {
        rawPriceIncreaseStatus.flatMap(PriceIncreaseStatus.init(rawInt:))
    }
    public var renewalOfferType: OfferType? { rawRenewalOfferType.flatMap(OfferType.init(rawInt:)) }
    public var renewalOfferDiscountType: OfferDiscountType? {
        rawRenewalOfferDiscountType.flatMap(OfferDiscountType.init(rawValue:))
    }
    public var revocationReason: RevocationReason? { rawRevocationReason.flatMap(RevocationReason.init(rawInt:)) }
    public var revocationType: RevocationType? { rawRevocationType.flatMap(RevocationType.init(rawValue:)) }
    public var offerType: OfferType? { rawOfferType.flatMap(OfferType.init(rawInt:)) }
    public var offerDiscountType: OfferDiscountType? { rawOfferDiscountType.flatMap(OfferDiscountType.init(rawValue:)) }
    public var transactionReason: TransactionReason? { rawTransactionReason.flatMap(TransactionReason.init(rawValue:)) }
    public var ownershipType: InAppOwnershipType? { rawOwnershipType.flatMap(InAppOwnershipType.init(rawValue:)) }
    public var environment: AppStoreEnvironment? { rawEnvironment.flatMap(AppStoreEnvironment.init(rawValue:)) }
    public var productType: ProductType? { rawType.flatMap(ProductType.init(rawValue:)) }

    /// True for a family member's access (the organizer pays and decides).
    public var isFamilyShared: Bool { ownershipType == .familyShared }

    /// True while the current period is a free trial.
    public var isFreeTrial: Bool { offerDiscountType == .freeTrial }

    /// The product a pending downgrade or crossgrade renews into; nil when it renews into the
    /// current product.
    public var pendingProductId: String? {
        guard let next = autoRenewProductId, next != productId else { return nil }
        return next
    }

    /// Identifies the current period: `webOrderLineItemId`, else `transactionId`.
    public var periodKey: String { webOrderLineItemId ?? transactionId }

    /// Raw values this version doesn't know, in a fixed order. A status that could not be
    /// derived at all is reported as `status: missing`.
    public var unknownValues: [UnknownValue] {
        var unknown: [UnknownValue] = []
        func check<T, U>(_ field: String, _ raw: T?, _ typed: (T) -> U?) {
            if let raw, typed(raw) == nil { unknown.append(UnknownValue(field: field, raw: "\(raw)")) }
        }
        if rawStatus == nil { unknown.append(UnknownValue(field: "status", raw: "missing")) }
        check("status", rawStatus, SubscriptionStatus.init(rawInt:))
        check("autoRenewStatus", rawAutoRenewStatus, AutoRenewStatus.init(rawInt:))
        check("expirationIntent", rawExpirationIntent, ExpirationIntent.init(rawInt:))
        check("priceIncreaseStatus", rawPriceIncreaseStatus, PriceIncreaseStatus.init(rawInt:))
        check("offerType", rawOfferType, OfferType.init(rawInt:))
        check("offerDiscountType", rawOfferDiscountType, OfferDiscountType.init(rawValue:))
        check("renewalInfo.offerType", rawRenewalOfferType, OfferType.init(rawInt:))
        check("renewalInfo.offerDiscountType", rawRenewalOfferDiscountType, OfferDiscountType.init(rawValue:))
        check("revocationReason", rawRevocationReason, RevocationReason.init(rawInt:))
        check("revocationType", rawRevocationType, RevocationType.init(rawValue:))
        check("inAppOwnershipType", rawOwnershipType, InAppOwnershipType.init(rawValue:))
        check("environment", rawEnvironment, AppStoreEnvironment.init(rawValue:))
        check("transactionReason", rawTransactionReason, TransactionReason.init(rawValue:))
        check("type", rawType, ProductType.init(rawValue:))
        return unknown
    }
}
