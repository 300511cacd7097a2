import AppStoreModels
import Foundation

// Apple's enumerations are AppStoreModels' (`SubscriptionStatus`, `AutoRenewStatus`,
// `ExpirationIntent`, `PriceIncreaseStatus`, `OfferType`, `OfferDiscountType`,
// `RevocationReason`, `RevocationType`, `InAppOwnershipType`, `AppStoreEnvironment`,
// `TransactionReason`, `ProductType`): one vocabulary for the wire, the simulator and the domain.
// Facts and snapshots keep the raw value; their typed views are nil for a value this version
// doesn't know, which is then reported as an `UnknownValue` instead of being dropped.

extension RawRepresentable where RawValue == Int32 {
    /// The typed value of a raw integer as facts and snapshots keep it; nil for a value this
    /// version doesn't know (including one outside `Int32`).
    init?(rawInt: Int) {
        guard let raw = Int32(exactly: rawInt) else { return nil }
        self.init(rawValue: raw)
    }

    /// The raw value as facts and snapshots keep it.
    var rawInt: Int { Int(rawValue) }
}

extension ExpirationIntent {
    /// A stable snake_case name for event details (docs/contracts.md).
    public var name: String {
        switch self {
        case .customerCancelled: "customer_cancelled"
        case .billingError: "billing_error"
        case .customerDidNotConsentToPriceIncrease: "price_increase_not_consented"
        case .productNotAvailable: "product_not_for_sale"
        case .other: "other"
        }
    }
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
