import ChurnModel
import Foundation
import Postgres

/// A row of `churnwatch.offers`: the promotional offer a campaign gives, per product or for all.
public struct CampaignOffer: Sendable, Equatable {
    public var campaign: WinbackCampaign
    /// nil: every product of the campaign's entries (stored as '').
    public var productId: String?
    public var offerId: String
    /// The share of entries held out, in [0, 1).
    public var holdout: Double
    public var updatedAt: Date?

    public init(campaign: WinbackCampaign, productId: String?, offerId: String, holdout: Double, updatedAt: Date? = nil) {
        self.campaign = campaign
        self.productId = productId
        self.offerId = offerId
        self.holdout = holdout
        self.updatedAt = updatedAt
    }
}

extension ChurnStore {
    /// Creates or replaces the offer of a campaign (for one product, or all when nil). Entries
    /// created from then on get it, and their holdout draw against its share.
    public func offersSet(_ offer: CampaignOffer) async throws {
        try await pool.withTransaction { db in
            try db.execute("""
                INSERT INTO churnwatch.offers (bundle_id, campaign, product_id, offer_id, holdout)
                VALUES (\(app), \(offer.campaign.rawValue), \(offer.productId ?? ""), \(offer.offerId), \(offer.holdout))
                ON CONFLICT (bundle_id, campaign, product_id) DO UPDATE SET offer_id = excluded.offer_id, holdout = excluded.holdout,
                    updated_at = now()
                """)
        }
    }

    /// Every configured offer, by campaign then product ('' first).
    public func offersList() async throws -> [CampaignOffer] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT campaign, product_id, offer_id, holdout, updated_at FROM churnwatch.offers WHERE bundle_id = \(app)
                ORDER BY campaign, product_id
                """).compactMap { row -> CampaignOffer? in
                guard let c = WinbackCampaign(rawValue: try row.decode(String.self, "campaign")) else { return nil }
                let product = try row.decode(String.self, "product_id")
                return CampaignOffer(campaign: c, productId: product.isEmpty ? nil : product, offerId: try row.decode(String.self, "offer_id"),
                                     holdout: try row.decode(Double.self, "holdout"), updatedAt: try row.decode(Date.self, "updated_at"))
            }
        }
    }

    /// Removes the offer of a campaign for one product (or the all-products one when nil).
    /// Returns how many rows went (0 or 1). Entries keep the offer they were given.
    public func offersRemove(campaign: WinbackCampaign, productId: String?) async throws -> Int {
        try await pool.withTransaction { db in
            try db.execute("""
                DELETE FROM churnwatch.offers WHERE bundle_id = \(app) AND campaign = \(campaign.rawValue) AND product_id = \(productId ?? "")
                """)
        }
    }

    /// Gives the entries created in this transaction (by the queue insert of a poll-results
    /// commit) the offer of their campaign and product, and draws their holdout: an entry whose
    /// `holdout_draw` falls below the offer's share becomes `held_out`, never claimable.
    static func winbackAssignOffers(_ db: PostgresConnection, app: String, _ q: WinbackColumns) throws {
        guard !q.ids.isEmpty else { return }
        try db.execute("""
            UPDATE churnwatch.winback_queue w SET
                offer_id = o.offer_id,
                holdout = churnwatch.holdout_draw(w.original_transaction_id, w.campaign, w.episode) < o.holdout,
                status = CASE WHEN churnwatch.holdout_draw(w.original_transaction_id, w.campaign, w.episode) < o.holdout
                              THEN 'held_out' ELSE w.status END,
                updated_at = now()
            FROM unnest(\(q.ids)::text[], \(q.campaigns)::text[], \(q.episodes)::text[], \(q.productIds)::text[])
                     AS u(id, campaign, episode, product_id)
                 CROSS JOIN LATERAL (
                     SELECT offer_id, holdout FROM churnwatch.offers o
                     WHERE o.bundle_id = \(app) AND o.campaign = u.campaign AND o.product_id IN (u.product_id, '')
                     ORDER BY o.product_id = '' LIMIT 1
                 ) AS o
            WHERE w.original_transaction_id = u.id AND w.campaign = u.campaign AND w.episode = u.episode
              AND w.created_at = now() AND w.offer_id IS NULL AND w.status = 'pending'
            """)
    }

    /// The holdout draw of one entry key, in [0, 1): the same number the queue uses.
    public func holdoutDraws(_ keys: [(originalTransactionId: String, campaign: WinbackCampaign, episode: String)]) async throws -> [Double] {
        let ids = keys.map(\.originalTransactionId), campaigns = keys.map(\.campaign.rawValue), episodes = keys.map(\.episode)
        return try await pool.withConnection { db in
            try db.query("""
                SELECT churnwatch.holdout_draw(id, campaign, episode) AS draw
                FROM unnest(\(ids)::text[], \(campaigns)::text[], \(episodes)::text[]) WITH ORDINALITY AS u(id, campaign, episode, n)
                ORDER BY n
                """).map { try $0.decode(Double.self, "draw") }
        }
    }

    /// Entries by id (for `offers sign`), in id order; unknown ids are left out.
    public func winbackEntries(ids: [Int64]) async throws -> [WinbackQueueEntry] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.winbackColumns) FROM churnwatch.winback_queue WHERE id = ANY(\(ids)) ORDER BY id
                """).map(Self.decodeWinbackEntry)
        }
    }
}
