/// The status of an auto-renewable subscription (`status` in `lastTransactions`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum SubscriptionStatus: Int32, Codable, Hashable, Sendable, CaseIterable {
    case active = 1
    case expired = 2
    case billingRetry = 3
    case billingGracePeriod = 4
    case revoked = 5
}
