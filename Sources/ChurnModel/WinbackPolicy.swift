import Foundation

/// Timing of the win-back campaigns. Durations are in seconds.
public struct WinbackPolicy: Sendable, Equatable, Hashable, Codable {
    /// `billing_fix` with a grace period goes out this long before grace ends. Default 1 day.
    public var graceLeadTime: TimeInterval
    /// `billing_fix` without a grace period goes out this long after retry began (the failed
    /// renewal). Default 6 days.
    public var retryDelay: TimeInterval
    /// `winback_offer` and `resubscribe_prompt` stay valid this long after expiry. Default 60 days.
    public var winbackHorizon: TimeInterval
    /// How long Apple retries a failed renewal at most: `billing_fix` expires this long after
    /// the failed renewal. Default 60 days.
    public var billingRetryLimit: TimeInterval
    /// Whether family members (`FAMILY_SHARED`) get campaigns. Default false: the organizer
    /// pays and decides, and the organizer's own subscription gets the campaign.
    public var includeFamilyShared: Bool

    public static let day: TimeInterval = 86_400

    public init(
        graceLeadTime: TimeInterval = 1 * day,
        retryDelay: TimeInterval = 6 * day,
        winbackHorizon: TimeInterval = 60 * day,
        billingRetryLimit: TimeInterval = 60 * day,
        includeFamilyShared: Bool = false
    ) {
        self.graceLeadTime = graceLeadTime
        self.retryDelay = retryDelay
        self.winbackHorizon = winbackHorizon
        self.billingRetryLimit = billingRetryLimit
        self.includeFamilyShared = includeFamilyShared
    }

    /// The defaults of docs/contracts.md.
    public static let `default` = WinbackPolicy()
}
