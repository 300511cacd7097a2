import ChurnModel
import Foundation
import Postgres

/// What the poll-results commit needs for the retention loop: each fresh subscription's
/// events and prices.
struct RetentionColumns {
    var ids: [String] = []
    /// Apple's `eligibleWinBackOfferIds` now, best first (JSON arrays).
    var winBackOffers: [PostgresJSON] = []
    var events: [String: [ChurnEvent]] = [:]
    /// The price a save keeps: the next renewal's, else the current period's.
    var keptPrice: [String: (Int64?, String?)] = [:]
    /// The moment each subscription was observed at (Apple's newest `signedDate` in the answer or
    /// the notification; none on the legacy receipt path): a horizon is closed only by an
    /// observation made after it, never by an older one applied late.
    var observedAt: [String: Date] = [:]

    mutating func append(_ p: PollWrite.Polled, _ id: String) {
        let s = p.snapshot
        ids.append(id)
        winBackOffers.append(PostgresJSON(array: s.eligibleWinBackOfferIds))
        if !p.events.isEmpty { events[id] = p.events }
        keptPrice[id] = s.renewalPrice != nil ? (s.renewalPrice, s.renewalCurrency) : (s.price, s.currency)
        observedAt[id] = s.signedDate
    }
}

extension ChurnStore {
    /// Inside the poll-results commit (after the segments, which carry the renewal price): Apple's
    /// current win-back offer ids on pending, undecided `winback_offer` entries, and the verdict on every
    /// open win-back entry (treated or held out) of the polled subscriptions, by
    /// `RetentionOutcomeRules.judge` at the moment each was observed (at most `asOf`): an
    /// outcome, or the good sign standing.
    static func retentionRecord(_ db: PostgresConnection, _ r: RetentionColumns, asOf: Date) throws {
        guard !r.ids.isEmpty else { return }
        let open = try db.query("""
            SELECT id, original_transaction_id, campaign, status, expires_at, good_sign_at FROM churnwatch.winback_queue
            WHERE original_transaction_id = ANY(\(r.ids)) AND outcome IS NULL
            """)
        try offerIdsRefresh(db, r, pending: Set(try open.compactMap { row in
            try row.decode(String.self, "campaign") == WinbackCampaign.winbackOffer.rawValue && row.decode(String.self, "status") == "pending"
                ? row.decode(String.self, "original_transaction_id") : nil
        }))
        var decided = OutcomeColumns(), signed: (ids: [Int64], at: [Date?]) = ([], [])
        for row in open {
            let otid = try row.decode(String.self, "original_transaction_id")
            guard let campaign = WinbackCampaign(rawValue: try row.decode(String.self, "campaign")) else { continue }
            let id = try row.decode(Int64.self, "id"), sign = try row.decode(Date?.self, "good_sign_at")
            switch RetentionOutcomeRules.judge(campaign: campaign, horizonEnd: try row.decode(Date?.self, "expires_at"), goodSign: sign,
                                               events: r.events[otid] ?? [], asOf: min(asOf, r.observedAt[otid] ?? asOf)) {
            case .decided(let outcome):
                decided.append(id, outcome, kept: r.keptPrice[otid] ?? (nil, nil))
            case .open(let now) where now != sign:
                signed.ids.append(id)
                signed.at.append(now)
            case .open:
                continue
            }
        }
        if !signed.ids.isEmpty {
            try db.execute("""
                UPDATE churnwatch.winback_queue AS w SET good_sign_at = u.at, updated_at = now()
                FROM unnest(\(signed.ids)::bigint[], \(signed.at)::timestamptz[]) AS u(id, at)
                WHERE w.id = u.id AND w.outcome IS NULL
                """)
        }
        guard !decided.ids.isEmpty else { return }
        try db.execute("""
            UPDATE churnwatch.winback_queue AS w SET outcome = u.kind, outcome_reason = u.reason, outcome_at = u.at,
                outcome_price = u.price, outcome_currency = u.currency, updated_at = now()
            FROM unnest(\(decided.ids)::bigint[], \(decided.kinds)::text[], \(decided.reasons)::text[], \(decided.ats)::timestamptz[],
                        \(decided.prices)::bigint[], \(decided.currencies)::text[]) AS u(id, kind, reason, at, price, currency)
            WHERE w.id = u.id AND w.outcome IS NULL
            """)
    }

    /// Apple's current win-back offer ids on the open, pending `winback_offer` entries of
    /// `pending` (their subscriptions): no statement at all when there are none, which is
    /// almost every notification (it matched no row and cost a millisecond each).
    private static func offerIdsRefresh(_ db: PostgresConnection, _ r: RetentionColumns, pending: Set<String>) throws {
        let picked = r.ids.indices.filter { pending.contains(r.ids[$0]) }
        guard !picked.isEmpty else { return }
        try db.execute("""
            UPDATE churnwatch.winback_queue AS w SET offer_ids = u.offers, updated_at = now()
            FROM (SELECT id, coalesce((SELECT array_agg(x) FROM jsonb_array_elements_text(o) AS x), '{}') AS offers
                  FROM unnest(\(picked.map { r.ids[$0] })::text[], \(picked.map { r.winBackOffers[$0] })::jsonb[]) AS v(id, o)) AS u
            WHERE w.original_transaction_id = u.id AND w.campaign = 'winback_offer' AND w.status = 'pending' AND w.outcome IS NULL
              AND w.offer_ids IS DISTINCT FROM u.offers
            """)
    }
}

/// Outcomes decided in one commit, as `unnest` columns.
struct OutcomeColumns {
    var ids: [Int64] = [], kinds: [String] = [], reasons: [String] = [], ats: [Date] = []
    var prices: [Int64?] = [], currencies: [String?] = []

    mutating func append(_ id: Int64, _ outcome: RetentionOutcome, kept: (Int64?, String?)) {
        ids.append(id)
        kinds.append(outcome.kind.rawValue)
        reasons.append(outcome.reason)
        ats.append(outcome.at)
        prices.append(kept.0)
        currencies.append(kept.1)
    }
}

/// One line of `churnwatch outcomes`: a campaign and offer (and product, when asked).
public struct OutcomeSummary: Sendable, Equatable {
    public enum Grouping: String, Sendable, CaseIterable {
        case campaign, offer, product
    }

    public var campaign: String
    /// nil for entries created without an offer, and when grouped by campaign only.
    public var offerId: String?
    /// Set when grouped by product.
    public var productId: String?
    /// Treated (not held out) entries.
    public var entries: Int
    /// Treated entries acked by a consumer (`done`).
    public var delivered: Int
    /// Treated entries with an outcome (open ones are not counted in the shares).
    public var decided: Int
    public var saved: Int
    public var holdoutEntries: Int
    public var holdoutDecided: Int
    public var holdoutSaved: Int
    /// Median days from the entry's opening (its run's or sync's moment) to the save (the good
    /// sign standing at the period's end, else the event that settled it), treated entries.
    public var medianDaysToSave: Double?
    /// Renewal price × treated saves, per ISO 4217 currency, in milliunits.
    public var revenueKept: [String: Int64]
    /// The cancel page's lines: the kind of answer its rules give (`message`, ...); nil otherwise.
    public var answerKind: String? = nil

    public var savedShare: Double? { decided > 0 ? Double(saved) / Double(decided) : nil }
    public var holdoutSavedShare: Double? { holdoutDecided > 0 ? Double(holdoutSaved) / Double(holdoutDecided) : nil }
    public var uplift: UpliftEstimate? {
        UpliftEstimate(treatedSaved: saved, treated: decided, heldOutSaved: holdoutSaved, heldOut: holdoutDecided)
    }
}

extension ChurnStore {
    /// Outcomes per campaign and offer (or per campaign, or per campaign, offer and product) of
    /// the entries opened since `since` (`opened_at`: their run's or sync's moment). An entry
    /// without a recorded outcome whose horizon (`expires_at`, plus the settle window for a save
    /// offer) has passed by `asOf` counts as lost.
    public func outcomeSummaries(since: Date?, grouping: OutcomeSummary.Grouping, asOf: Date) async throws -> [OutcomeSummary] {
        try await pool.withConnection { db in
            try Self.outcomeSummaries(db, app: app, since: since, grouping: grouping, asOf: asOf)
        }
    }

    /// `outcomeSummaries` on a connection the caller holds (the report reads them in its snapshot).
    static func outcomeSummaries(_ db: PostgresConnection, app: String, since: Date?, grouping: OutcomeSummary.Grouping,
                                 asOf: Date) throws -> [OutcomeSummary] {
        let byOffer = grouping != .campaign, byProduct = grouping == .product
        let entries: PostgresQuery = """
            SELECT w.campaign, CASE WHEN \(byOffer) THEN w.offer_id END AS offer_id,
                   CASE WHEN \(byProduct) THEN w.product_id END AS product_id, w.holdout, w.status,
                   coalesce(w.outcome, CASE WHEN w.expires_at + make_interval(secs => CASE WHEN w.campaign = 'save_offer'
                       THEN \(RetentionOutcomeRules.settleWindow) ELSE 0 END) <= \(asOf) THEN 'lost' END) AS outcome,
                   w.outcome_at, w.outcome_price, w.outcome_currency, w.opened_at
            FROM churnwatch.winback_queue w
            WHERE w.bundle_id = \(app) AND (\(since)::timestamptz IS NULL OR w.opened_at >= \(since)::timestamptz)
            """
        var summaries: [OutcomeSummary] = []
        var index: [String: Int] = [:]
        func key(_ row: PostgresRow) throws -> String {
            [try row.decode(String.self, "campaign"), try row.decode(String?.self, "offer_id") ?? "\u{0}",
             try row.decode(String?.self, "product_id") ?? "\u{0}"].joined(separator: "\u{1}")
        }
        for row in try db.query("""
            WITH e AS (\(entries))
            SELECT campaign, offer_id, product_id,
                count(*) FILTER (WHERE NOT holdout) AS entries,
                count(*) FILTER (WHERE NOT holdout AND status = 'done') AS delivered,
                count(*) FILTER (WHERE NOT holdout AND outcome IS NOT NULL) AS decided,
                count(*) FILTER (WHERE NOT holdout AND outcome = 'saved') AS saved,
                count(*) FILTER (WHERE holdout) AS holdout_entries,
                count(*) FILTER (WHERE holdout AND outcome IS NOT NULL) AS holdout_decided,
                count(*) FILTER (WHERE holdout AND outcome = 'saved') AS holdout_saved,
                percentile_cont(0.5) WITHIN GROUP (ORDER BY greatest(0, extract(epoch FROM outcome_at - opened_at)) / 86400)
                    FILTER (WHERE NOT holdout AND outcome = 'saved') AS median_days
            FROM e GROUP BY 1, 2, 3 ORDER BY 1, 2 NULLS LAST, 3 NULLS LAST
            """) {
            index[try key(row)] = summaries.count
            summaries.append(OutcomeSummary(
                campaign: try row.decode(String.self, "campaign"), offerId: try row.decode(String?.self, "offer_id"),
                productId: try row.decode(String?.self, "product_id"), entries: try row.decode(Int.self, "entries"),
                delivered: try row.decode(Int.self, "delivered"), decided: try row.decode(Int.self, "decided"),
                saved: try row.decode(Int.self, "saved"), holdoutEntries: try row.decode(Int.self, "holdout_entries"),
                holdoutDecided: try row.decode(Int.self, "holdout_decided"), holdoutSaved: try row.decode(Int.self, "holdout_saved"),
                medianDaysToSave: try row.decode(Double?.self, "median_days"), revenueKept: [:]))
        }
        for row in try db.query("""
            WITH e AS (\(entries))
            SELECT campaign, offer_id, product_id, outcome_currency AS currency, sum(outcome_price)::bigint AS kept
            FROM e WHERE NOT holdout AND outcome = 'saved' AND outcome_price IS NOT NULL AND outcome_currency IS NOT NULL
            GROUP BY 1, 2, 3, 4
            """) {
            guard let i = index[try key(row)] else { continue }
            summaries[i].revenueKept[try row.decode(String.self, "currency")] = try row.decode(Int64.self, "kept")
        }
        return summaries
    }
}
