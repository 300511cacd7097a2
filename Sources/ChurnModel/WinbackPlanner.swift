import Foundation

/// Decides the win-back queue entries of a subscription (docs/contracts.md, campaign table).
/// Pure and idempotent: the episode key comes from Apple's data, not from `asOf`.
public enum WinbackPlanner {
    /// The entries the current state calls for and the episodes of the previous state whose
    /// reason went away.
    ///
    /// An episode of the previous state whose window has closed by `asOf` (a save offer after
    /// its period ended, a win-back after its horizon) is not obsolete: the queue expires it.
    /// Nothing happens for a stale snapshot or one with an unknown status.
    public static func decide(
        previous: SubscriptionSnapshot?,
        current: SubscriptionSnapshot,
        asOf: Date,
        policy: WinbackPolicy = .default
    ) -> WinbackDecision {
        if ChangeDetector.isStale(current, comparedTo: previous) { return WinbackDecision(stale: true) }
        guard current.state != .unknown else { return WinbackDecision() }
        let previous = previous.flatMap {
            $0.originalTransactionId == current.originalTransactionId && $0.state != .unknown ? $0 : nil
        }
        let now = entry(for: current, asOf: asOf, policy: policy)
        var decision = WinbackDecision(entries: now.map { [$0] } ?? [])
        if let previous, let before = entry(for: previous, asOf: asOf, policy: policy),
           before.episodeRef != now?.episodeRef {
            decision.obsolete = [ObsoleteEpisode(
                campaign: before.campaign,
                episode: before.episode,
                reason: obsoleteReason(previous: previous, current: current, asOf: asOf)
            )]
        }
        return decision
    }

    /// The entry a snapshot calls for at `asOf`, or nil: no campaign for its segment, a family
    /// member (unless the policy includes them), or a window already closed.
    public static func entry(
        for snapshot: SubscriptionSnapshot,
        asOf: Date,
        policy: WinbackPolicy = .default
    ) -> WinbackEntry? {
        if snapshot.isFamilyShared && !policy.includeFamilyShared { return nil }
        let segment = SegmentClassifier.segment(for: snapshot, asOf: asOf)
        guard let campaign = WinbackCampaign(segment: segment) else { return nil }
        let window: (episode: String, notBefore: Date, expiresAt: Date)?
        switch campaign {
        case .saveOffer:
            window = saveWindow(snapshot, asOf: asOf)
        case .billingFix:
            window = billingWindow(snapshot, policy: policy)
        case .winbackOffer, .resubscribePrompt:
            window = churnWindow(snapshot, asOf: asOf, policy: policy)
        }
        guard let window, window.expiresAt > asOf, window.notBefore < window.expiresAt else { return nil }
        return WinbackEntry(
            campaign: campaign,
            episode: window.episode,
            productId: snapshot.productId,
            reason: segment.rawValue,
            offerIds: snapshot.eligibleWinBackOfferIds,
            notBefore: window.notBefore,
            expiresAt: window.expiresAt
        )
    }

    /// One period at risk: from detection until the period ends.
    private static func saveWindow(_ s: SubscriptionSnapshot, asOf: Date) -> (String, Date, Date)? {
        guard let end = s.periodEnd ?? s.renewalDate else { return nil }
        return ("period:\(s.periodKey)", asOf, end)
    }

    /// One billing-retry spell, which began at the failed renewal (the end of the period).
    private static func billingWindow(_ s: SubscriptionSnapshot, policy: WinbackPolicy) -> (String, Date, Date)? {
        guard let retryStart = s.periodEnd ?? s.renewalDate else { return nil }
        let notBefore: Date
        if let grace = s.gracePeriodExpiresDate {
            notBefore = max(retryStart, grace.addingTimeInterval(-policy.graceLeadTime))
        } else {
            notBefore = retryStart.addingTimeInterval(policy.retryDelay)
        }
        return ("retry:\(s.periodKey)", notBefore, retryStart.addingTimeInterval(policy.billingRetryLimit))
    }

    /// One churn: from expiry for the horizon. A billing churn (intent 2) expires when Apple
    /// stops retrying, which Apple doesn't date: the detection time stands in for it, bounded
    /// by the longest possible retry.
    private static func churnWindow(_ s: SubscriptionSnapshot, asOf: Date, policy: WinbackPolicy) -> (String, Date, Date)? {
        guard let end = s.periodEnd else { return nil }
        var expiry = end
        if s.expirationIntent == .billingError {
            expiry = max(end, min(asOf, end.addingTimeInterval(policy.billingRetryLimit)))
        }
        return ("expired:\(s.periodKey)", expiry, expiry.addingTimeInterval(policy.winbackHorizon))
    }

    /// The event that ended the previous episode, in order of precedence.
    private static func obsoleteReason(previous: SubscriptionSnapshot, current: SubscriptionSnapshot, asOf: Date) -> String {
        let found = Set(ChangeDetector.events(previous: previous, current: current, asOf: asOf).events.map(\.type))
        let precedence: [ChurnEventType] = [
            .resubscribed, .billingRecovered, .refunded, .planChangeScheduled, .priceIncreaseAccepted,
            .autoRenewEnabled, .renewed, .planChanged, .expired,
        ]
        if let type = precedence.first(where: found.contains) { return type.rawValue }
        return "segment:\(SegmentClassifier.segment(for: current, asOf: asOf).rawValue)"
    }
}
