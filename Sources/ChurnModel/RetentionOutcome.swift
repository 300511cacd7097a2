import Foundation

/// What became of a subscription after a win-back entry was created for it, treated or held
/// out: the retention loop's measure (docs/churn-model.md, "Outcomes").
public struct RetentionOutcome: Sendable, Equatable, Hashable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// The customer stayed or came back within the entry's horizon.
        case saved
        /// The customer left, or the horizon passed without a save.
        case lost
    }

    public var kind: Kind
    /// The event that decided it (`auto_renew_enabled`, `billing_recovered`, `resubscribed`,
    /// `plan_change_scheduled`, `expired`, ...), or `horizon` when the window closed first.
    public var reason: String
    /// When it happened: the event's time (Apple's), or the end of the horizon.
    public var at: Date

    public init(kind: Kind, reason: String, at: Date) {
        self.kind = kind
        self.reason = reason
        self.at = at
    }

    /// The reason of an outcome decided by the horizon closing.
    public static let horizon = "horizon"
}

/// The outcome rules: pure, from the events churnwatch detects between two polls.
public enum RetentionOutcomeRules {
    /// Events that count as a save for a campaign, in order of precedence when two share a time.
    /// Moving to another plan (`plan_change_scheduled`, `plan_changed`) instead of leaving is a
    /// save; so is renewing anyway.
    public static func savingEvents(for campaign: WinbackCampaign) -> [ChurnEventType] {
        switch campaign {
        case .saveOffer:
            return [.planChangeScheduled, .planChanged, .priceIncreaseAccepted, .autoRenewEnabled, .renewed, .resubscribed]
        case .billingFix:
            return [.billingRecovered, .renewed, .planChanged, .resubscribed]
        case .winbackOffer, .resubscribePrompt:
            return [.resubscribed, .billingRecovered, .renewed]
        }
    }

    /// Events that count as a loss: the period ended without a renewal, or a refund. Churned
    /// customers (`winback_offer`, `resubscribe_prompt`) are lost only when the horizon closes.
    public static func losingEvents(for campaign: WinbackCampaign) -> [ChurnEventType] {
        switch campaign {
        case .saveOffer, .billingFix: return [.expired, .refunded]
        case .winbackOffer, .resubscribePrompt: return []
        }
    }

    /// The outcome of one open entry of `campaign` given the events detected at a poll (or nil
    /// while it is still open).
    ///
    /// The earliest deciding event within the horizon wins (a loss before a save at the same
    /// time, then the precedence of `savingEvents`). Events after `horizonEnd` do not count.
    /// Without a deciding event, an entry whose horizon has closed by `asOf` is lost at
    /// `horizonEnd` (reason `horizon`). `horizonEnd` is the entry's `expires_at`: the end of the
    /// period for a save offer, the end of the retry or win-back window for the others; nil
    /// means no horizon.
    public static func decide(
        campaign: WinbackCampaign,
        horizonEnd: Date?,
        events: [ChurnEvent],
        asOf: Date
    ) -> RetentionOutcome? {
        let saving = savingEvents(for: campaign)
        let losing = losingEvents(for: campaign)
        func rank(_ type: ChurnEventType) -> Int? {
            if let i = losing.firstIndex(of: type) { return i }
            if let i = saving.firstIndex(of: type) { return losing.count + i }
            return nil
        }
        let deciding = events
            .filter { event in rank(event.type) != nil && (horizonEnd.map { event.occurredAt <= $0 } ?? true) }
            .min { a, b in
                a.occurredAt != b.occurredAt ? a.occurredAt < b.occurredAt : rank(a.type)! < rank(b.type)!
            }
        if let deciding {
            let kind: RetentionOutcome.Kind = losing.contains(deciding.type) ? .lost : .saved
            return RetentionOutcome(kind: kind, reason: deciding.type.rawValue, at: deciding.occurredAt)
        }
        if let horizonEnd, horizonEnd <= asOf {
            return RetentionOutcome(kind: .lost, reason: RetentionOutcome.horizon, at: horizonEnd)
        }
        return nil
    }
}
