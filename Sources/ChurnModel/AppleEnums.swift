import Foundation

// Apple's enumerations (docs/apple-api.md). Facts and snapshots keep the raw value; these
// typed views are nil for a value this version doesn't know, which is then reported as an
// `UnknownValue` instead of being dropped.

/// Apple's subscription status from Get All Subscription Statuses.
public enum AppleSubscriptionStatus: Int, Sendable, Codable, CaseIterable {
    case active = 1
    case expired = 2
    case billingRetry = 3
    case billingGracePeriod = 4
    case revoked = 5
}

/// `autoRenewStatus`: whether the subscription renews at the end of the period.
public enum AutoRenewStatus: Int, Sendable, Codable, CaseIterable {
    /// Turned off (by the customer, or by Apple after a refund request).
    case off = 0
    case on = 1
}

/// `expirationIntent`: why a subscription expired. Present only after expiry.
public enum ExpirationIntent: Int, Sendable, Codable, CaseIterable {
    case customerCancelled = 1
    case billingError = 2
    /// The customer didn't consent to a price increase (or an offer conversion needing consent).
    case priceIncreaseNotConsented = 3
    case productNotForSale = 4
    case other = 5

    /// A stable snake_case name for event details.
    public var name: String {
        switch self {
        case .customerCancelled: "customer_cancelled"
        case .billingError: "billing_error"
        case .priceIncreaseNotConsented: "price_increase_not_consented"
        case .productNotForSale: "product_not_for_sale"
        case .other: "other"
        }
    }
}

/// `priceIncreaseStatus`. Absent when there is no price increase.
public enum PriceIncreaseStatus: Int, Sendable, Codable, CaseIterable {
    /// The customer hasn't responded to an increase that needs consent.
    case pending = 0
    /// The customer consented, or was notified of an increase that needs no consent.
    case accepted = 1
}

/// `offerType`.
public enum OfferType: Int, Sendable, Codable, CaseIterable {
    case introductory = 1
    case promotional = 2
    case offerCode = 3
    case winBack = 4
}

/// `offerDiscountType`: the payment mode of the offer.
public enum OfferDiscountType: String, Sendable, Codable, CaseIterable {
    case freeTrial = "FREE_TRIAL"
    case payAsYouGo = "PAY_AS_YOU_GO"
    case payUpFront = "PAY_UP_FRONT"
    case oneTime = "ONE_TIME"
}

/// `revocationReason`.
public enum RevocationReason: Int, Sendable, Codable, CaseIterable {
    /// Other reason, e.g. an accidental purchase; also family leave or stop-sharing.
    case other = 0
    /// A real or perceived problem in the app.
    case appIssue = 1
}

/// `revocationType`.
public enum RevocationType: String, Sendable, Codable, CaseIterable {
    case refundFull = "REFUND_FULL"
    case refundProrated = "REFUND_PRORATED"
    case familyRevoke = "FAMILY_REVOKE"
}

/// `inAppOwnershipType`.
public enum InAppOwnershipType: String, Sendable, Codable, CaseIterable {
    case purchased = "PURCHASED"
    case familyShared = "FAMILY_SHARED"
}

/// `environment`.
public enum AppleEnvironment: String, Sendable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

/// `transactionReason`.
public enum TransactionReason: String, Sendable, Codable, CaseIterable {
    /// Customer-initiated: first purchase, resubscribe, immediate upgrade.
    case purchase = "PURCHASE"
    /// Apple-initiated: a renewal (a downgrade shows up as one at the next renewal).
    case renewal = "RENEWAL"
}

/// `type`: the product type.
public enum ProductType: String, Sendable, Codable, CaseIterable {
    case autoRenewable = "Auto-Renewable Subscription"
    case nonConsumable = "Non-Consumable"
    case consumable = "Consumable"
    case nonRenewing = "Non-Renewing Subscription"
}

/// A raw value Apple sent that this version doesn't know. It is kept in the snapshot, reported
/// here, and rules treat it conservatively (see docs/churn-model.md).
public struct UnknownValue: Sendable, Equatable, Hashable, Codable {
    /// Apple's field name, e.g. `expirationIntent` or `status`.
    public var field: String
    /// The raw value as text (`"7"`, `"SOMETHING_NEW"`); `"missing"` when a required value
    /// could not be derived at all.
    public var raw: String

    public init(field: String, raw: String) {
        self.field = field
        self.raw = raw
    }
}
