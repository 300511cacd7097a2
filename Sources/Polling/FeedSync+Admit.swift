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
    /// Verifies one posted `signedPayload` as the feed verifies an inbox row, up to its inner
    /// JWS: chain, OIDs, bundle id and app Apple id, environment (a Sandbox notification
    /// accepted in a Production deployment), as Apple's libraries verify a notification. Its
    /// inner signed transaction and renewal info are bytes that signature covers; the applier
    /// verifies them before deciding anything (``drainInbox``), and one that fails there is
    /// quarantined as from the history.
    public func admit(_ signedPayload: String) async -> NotificationAdmission {
        let alsoSandbox = environments.contains(.sandbox) && environment != .sandbox
        let input = await verifyOne(signedPayload, inboxId: nil, source: .inbox, environment: nil, alsoSandbox: alsoSandbox, inner: false)
        switch input.verdict {
        case .verified(let v): return .verified(v)
        case .rejected(let why): return .rejected(why)
        }
    }

    /// Read before verification only to choose which app's verifier to ask: whether a notification's payload can be read at all (a JWS whose payload is a JSON
    /// object), and the bundle id it claims.
    public static func claim(_ signedPayload: String) -> (readable: Bool, bundleId: String?) {
        InboxPayload.claim(signedPayload)
    }
}
