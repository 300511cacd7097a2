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

/// The outcome rules: pure, from the events churnwatch detects between two observations
/// (docs/churn-model.md, "Outcomes").
///
/// A save offer is judged by who stayed: by what happened at the end of the period it was about
/// (a renewal, a move to another plan, a renewal Apple could not charge yet: still set to renew),
/// not by the first good sign before it, which can be undone. The first good sign that still
/// stands at the end is the moment of the save (`RetentionOutcome.at`). The other campaigns are
/// decided by the first event that settles them: a recovery, a return, an expiry.
public enum RetentionOutcomeRules {
    /// How long after a save offer's horizon (the period end) the event that settles it may be
    /// dated: Apple charges a renewal around the period end, not always to the second.
    public static let settleWindow: TimeInterval = 86_400

    /// What the rules say of an open entry after an observation.
    public enum Verdict: Sendable, Equatable {
        /// Still open; `goodSign`: when the customer first showed they would stay, since the last
        /// sign they would not (nil: none standing).
        case open(goodSign: Date?)
        case decided(RetentionOutcome)

        /// The outcome, once decided.
        public var outcome: RetentionOutcome? {
            if case .decided(let o) = self { return o }
            return nil
        }
    }

    /// Events that settle an entry as saved, in order of precedence when two share a time.
    public static func savingEvents(for campaign: WinbackCampaign) -> [ChurnEventType] {
        switch campaign {
        case .saveOffer: [.renewed, .planChanged, .billingRetryStarted, .gracePeriodStarted]
        case .billingFix: [.billingRecovered, .renewed, .planChanged, .resubscribed]
        case .winbackOffer, .resubscribePrompt: [.resubscribed, .billingRecovered, .renewed]
        }
    }

    /// Events that settle an entry as lost: the period ended without a renewal, or a refund.
    /// Churned customers (`winback_offer`, `resubscribe_prompt`) are lost only when the horizon
    /// closes.
    public static func losingEvents(for campaign: WinbackCampaign) -> [ChurnEventType] {
        switch campaign {
        case .saveOffer, .billingFix: [.expired, .refunded]
        case .winbackOffer, .resubscribePrompt: []
        }
    }

    /// Signs, before a save offer's horizon, that the customer will stay (they decide nothing)
    /// and that they will not (they cancel the signs before them).
    public static func signs(for campaign: WinbackCampaign) -> (good: [ChurnEventType], bad: [ChurnEventType]) {
        switch campaign {
        case .saveOffer: ([.autoRenewEnabled, .priceIncreaseAccepted, .planChangeScheduled], [.autoRenewDisabled, .priceIncreasePending])
        case .billingFix, .winbackOffer, .resubscribePrompt: ([], [])
        }
    }

    /// The verdict on one open entry of `campaign` given the events of an observation at `asOf`.
    ///
    /// In time order (a loss before a save at the same time, then the precedence of
    /// `savingEvents`), the first settling event dated within the horizon (`horizonEnd`, plus
    /// ``settleWindow`` for a save offer) decides; a save is dated by the good sign standing
    /// (`goodSign`, carried from earlier observations), else by the event. Events dated later
    /// do not settle a campaign, except a save offer's: seen nights apart, a renewal, a change or
    /// an expiry Apple dates after the window shows the subscription lived on past its horizon
    /// (saved, dated by the sign or the horizon); a return after it shows it did not. Without a
    /// settling event, an entry whose horizon has closed by `asOf` is lost at `horizonEnd`
    /// (reason `horizon`). `horizonEnd` is the entry's `expires_at`: the end of the period for a save
    /// offer, of the retry or win-back window for the others; nil means no horizon.
    public static func judge(
        campaign: WinbackCampaign,
        horizonEnd: Date?,
        goodSign: Date? = nil,
        events: [ChurnEvent],
        asOf: Date
    ) -> Verdict {
        let saving = savingEvents(for: campaign), losing = losingEvents(for: campaign), (good, bad) = signs(for: campaign)
        let last = horizonEnd.map { $0.addingTimeInterval(settlesWithin(campaign)) }
        func rank(_ type: ChurnEventType) -> Int {
            losing.firstIndex(of: type) ?? saving.firstIndex(of: type).map { losing.count + $0 } ?? losing.count + saving.count
        }
        let sorted = events.sorted { a, b in a.occurredAt != b.occurredAt ? a.occurredAt < b.occurredAt : rank(a.type) < rank(b.type) }
        var sign = goodSign
        for event in sorted {
            if let last, let horizonEnd, event.occurredAt > last {
                // Seen late (nights apart): for a save offer, anything Apple dates after the
                // settle window but a return shows the subscription lived on past the horizon.
                guard campaign == .saveOffer, event.type != .resubscribed else { break }
                return .decided(RetentionOutcome(kind: .saved, reason: event.type.rawValue, at: sign ?? horizonEnd))
            }
            if losing.contains(event.type) {
                return .decided(RetentionOutcome(kind: .lost, reason: event.type.rawValue, at: event.occurredAt))
            }
            if saving.contains(event.type) {
                return .decided(RetentionOutcome(kind: .saved, reason: event.type.rawValue, at: sign ?? event.occurredAt))
            }
            if good.contains(event.type) { sign = sign ?? event.occurredAt }
            if bad.contains(event.type) { sign = nil }
        }
        if let horizonEnd, let last, last <= asOf {
            return .decided(RetentionOutcome(kind: .lost, reason: RetentionOutcome.horizon, at: horizonEnd))
        }
        return .open(goodSign: sign)
    }

    /// How long after `horizonEnd` an entry of `campaign` can still be settled by an event.
    public static func settlesWithin(_ campaign: WinbackCampaign) -> TimeInterval {
        campaign == .saveOffer ? settleWindow : 0
    }
}
