import Foundation

/// One campaign episode: a campaign and the key of one continuous stretch of the same risk.
/// At most one queue entry exists per subscription and episode.
public struct WinbackEpisode: Sendable, Equatable, Hashable, Codable {
    public var campaign: WinbackCampaign
    /// Stable for the whole stretch, derived from Apple's data, never from the poll time:
    /// `period:<id>` (save offer: one period at risk), `retry:<id>` (one billing-retry spell),
    /// `expired:<id>` (one churn), where `<id>` is the period's `webOrderLineItemId`, else its
    /// `transactionId`.
    public var key: String

    public init(campaign: WinbackCampaign, key: String) {
        self.campaign = campaign
        self.key = key
    }
}

/// A queue entry to create (if absent: insert on subscription + campaign + episode).
public struct WinbackEntry: Sendable, Equatable, Hashable, Codable {
    public var campaign: WinbackCampaign
    /// The episode key (see `WinbackEpisode.key`).
    public var episode: String
    public var productId: String
    /// Why: the segment that calls for the campaign (e.g. `will_not_renew`).
    public var reason: String
    /// Apple's `eligibleWinBackOfferIds`, best first; empty when Apple lists none.
    public var offerIds: [String]
    /// Not to be sent before this time.
    public var notBefore: Date
    /// Not to be sent after this time.
    public var expiresAt: Date

    public init(
        campaign: WinbackCampaign,
        episode: String,
        productId: String,
        reason: String,
        offerIds: [String],
        notBefore: Date,
        expiresAt: Date
    ) {
        self.campaign = campaign
        self.episode = episode
        self.productId = productId
        self.reason = reason
        self.offerIds = offerIds
        self.notBefore = notBefore
        self.expiresAt = expiresAt
    }

    public var episodeRef: WinbackEpisode { WinbackEpisode(campaign: campaign, key: episode) }

    private enum CodingKeys: String, CodingKey {
        case campaign, episode, reason
        case productId = "product_id"
        case offerIds = "offer_ids"
        case notBefore = "not_before_ms"
        case expiresAt = "expires_at_ms"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        campaign = try c.decode(WinbackCampaign.self, forKey: .campaign)
        episode = try c.decode(String.self, forKey: .episode)
        productId = try c.decode(String.self, forKey: .productId)
        reason = try c.decode(String.self, forKey: .reason)
        offerIds = try c.decodeIfPresent([String].self, forKey: .offerIds) ?? []
        notBefore = try c.decodeMilliseconds(forKey: .notBefore) ?? Date(timeIntervalSince1970: 0)
        expiresAt = try c.decodeMilliseconds(forKey: .expiresAt) ?? Date(timeIntervalSince1970: 0)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(campaign, forKey: .campaign)
        try c.encode(episode, forKey: .episode)
        try c.encode(productId, forKey: .productId)
        try c.encode(reason, forKey: .reason)
        try c.encode(offerIds, forKey: .offerIds)
        try c.encodeMilliseconds(notBefore, forKey: .notBefore)
        try c.encodeMilliseconds(expiresAt, forKey: .expiresAt)
    }
}

/// An episode whose reason went away: its live (pending) entries become `obsolete`.
public struct ObsoleteEpisode: Sendable, Equatable, Hashable, Codable {
    public var campaign: WinbackCampaign
    public var episode: String
    /// What ended it, usually the event name: `auto_renew_enabled`, `billing_recovered`,
    /// `resubscribed`, `plan_change_scheduled`, `price_increase_accepted`, `renewed`,
    /// `refunded`, `expired`; else `segment:<new segment>`.
    public var reason: String

    public init(campaign: WinbackCampaign, episode: String, reason: String) {
        self.campaign = campaign
        self.episode = episode
        self.reason = reason
    }

    public var episodeRef: WinbackEpisode { WinbackEpisode(campaign: campaign, key: episode) }
}

/// What `WinbackPlanner.decide` wants done for one subscription.
public struct WinbackDecision: Sendable, Equatable, Hashable {
    /// Entries the current state calls for (zero or one). Insert if absent: the same state
    /// always yields the same episode, so a re-run or a second poll never adds a second entry.
    public var entries: [WinbackEntry]
    /// Episodes the previous state called for whose reason went away.
    public var obsolete: [ObsoleteEpisode]
    /// The current snapshot is older than the previous one: nothing to do.
    public var stale: Bool

    public init(entries: [WinbackEntry] = [], obsolete: [ObsoleteEpisode] = [], stale: Bool = false) {
        self.entries = entries
        self.obsolete = obsolete
        self.stale = stale
    }
}
