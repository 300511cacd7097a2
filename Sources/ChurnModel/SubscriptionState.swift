import AppStoreModels
import Foundation

/// The normalized state of a subscription, after Apple's status (1–5).
///
/// A grace period is billing retry with access until `gracePeriodExpiresDate`.
public enum SubscriptionState: String, Sendable, Codable, CaseIterable {
    case active
    case expired
    case billingRetry = "billing_retry"
    case gracePeriod = "grace_period"
    case revoked
    /// Apple reported a status this version doesn't know, or (legacy path) no status could be
    /// derived. Flagged in `SubscriptionSnapshot.unknownValues`; no events, segment `unknown`.
    case unknown

    public init(_ status: SubscriptionStatus) {
        switch status {
        case .active: self = .active
        case .expired: self = .expired
        case .billingRetry: self = .billingRetry
        case .billingGracePeriod: self = .gracePeriod
        case .revoked: self = .revoked
        }
    }

    /// Apple's raw status for this state; nil for `unknown`.
    public var appleStatus: SubscriptionStatus? {
        switch self {
        case .active: .active
        case .expired: .expired
        case .billingRetry: .billingRetry
        case .gracePeriod: .billingGracePeriod
        case .revoked: .revoked
        case .unknown: nil
        }
    }

    /// Billing retry, with or without grace: Apple is still trying to charge.
    public var isBillingTrouble: Bool { self == .billingRetry || self == .gracePeriod }

    /// The customer no longer has the subscription: it expired or was revoked.
    public var isChurned: Bool { self == .expired || self == .revoked }
}
