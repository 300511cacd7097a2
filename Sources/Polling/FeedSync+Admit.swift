import AppStoreServerAPI
import Foundation

/// What `churnwatch serve` decides about one notification Apple posted, before anything is
/// written: verified as this app's (then stored and applied), or rejected with the reason.
public enum NotificationAdmission: Sendable {
    case verified(VerifiedNotification)
    /// Why it is not trusted (a bad signature, another chain, another app, another environment).
    case rejected(String)
}

extension FeedSync {
    /// Verifies one posted `signedPayload` exactly as the feed verifies an inbox row (chain,
    /// OIDs, bundle id and app Apple id, environment, the inner JWS; a Sandbox notification
    /// accepted in a Production deployment), so what serve stores, the applier will apply.
    public func admit(_ signedPayload: String) async -> NotificationAdmission {
        guard let input = await verify([(signedPayload, nil)], source: .inbox).first else { return .rejected("nothing to verify") }
        switch input.verdict {
        case .verified(let v): return .verified(v)
        case .rejected(let why): return .rejected(why)
        }
    }

    /// The bundle id a notification's payload claims, read before verification only to choose
    /// which app's verifier to ask; nil when it cannot be read.
    public static func claimedBundleId(_ signedPayload: String) -> String? {
        InboxPayload.claimedBundleId(signedPayload)
    }
}
