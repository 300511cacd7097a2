import ChurnModel
import Foundation
import Postgres

/// A row of `churnwatch.winback_queue` (docs/contracts.md), as consumers see it.
public struct WinbackQueueEntry: Sendable, Equatable {
    /// The entry's life: `pending` → `claimed` → `done`; a claim can be released (back to
    /// `pending`) or run out (claimable again); `obsolete` when the reason went away, `expired`
    /// when its window closed before anyone sent it; `held_out` when the holdout drew it (never
    /// claimable: it measures what happens without the offer).
    public enum Status: String, Sendable, CaseIterable {
        case pending, claimed, done, obsolete, expired
        case heldOut = "held_out"
    }

    public var id: Int64
    public var originalTransactionId: String
    public var appAccountToken: UUID?
    public var customerRef: String?
    public var campaign: WinbackCampaign
    public var productId: String?
    public var reason: String
    /// Apple's `eligibleWinBackOfferIds`, best first; empty when Apple named none.
    public var offerIds: [String]
    public var notBefore: Date
    /// nil means the entry never expires.
    public var expiresAt: Date?
    public var episode: String
    public var status: Status
    public var claimedBy: String?
    public var claimedAt: Date?
    /// When the claim runs out; a claimed entry past it is claimable again.
    public var claimExpiresAt: Date?
    /// When the row was written (the wall clock).
    public var createdAt: Date
    /// The run's or sync's moment the entry was opened (`--as-of`): what ages and filters it.
    public var openedAt: Date
    /// The promotional offer the campaign gave it (`churnwatch.offers`), held out or not.
    public var offerId: String? = nil
    public var holdout = false
    /// `saved` or `lost` once decided (docs/churn-model.md, "Outcomes").
    public var outcome: String? = nil
    public var outcomeReason: String? = nil
    public var outcomeAt: Date? = nil
    /// The app the subscription belongs to (bundle id).
    public var bundleId = ""
}

/// What one `winbackClaim` did.
public struct WinbackClaim: Sendable, Equatable {
    /// The entries claimed, oldest first.
    public var entries: [WinbackQueueEntry]
    /// Entries of the campaign marked `expired` first because their window had closed.
    public var expired: Int
}

/// What `winbackAck` or `winbackRelease` did with each id it was given.
public struct WinbackSettlement: Sendable, Equatable {
    /// Why an id was not acked or released.
    public enum Refusal: Sendable, Equatable, CustomStringConvertible {
        /// No entry has this id.
        case unknown
        /// The entry is not claimed (pending, obsolete, expired, or done by someone else).
        case notClaimed(WinbackQueueEntry.Status)
        /// Claimed, but by another consumer.
        case claimedByOther(String)

        public var description: String {
            switch self {
            case .unknown: return "unknown"
            case .notClaimed(let s): return s.rawValue
            case .claimedByOther(let who): return "claimed by \(who)"
            }
        }
    }

    /// Ids changed now, ascending.
    public var settled: [Int64] = []
    /// Ids acked earlier (by the same consumer, when one was named): an ack retried after a
    /// lost answer is not an error. Always empty for releases.
    public var alreadyDone: [Int64] = []
    /// Ids left alone, ascending, with the reason.
    public var refused: [Refused] = []

    /// An id left alone and why.
    public struct Refused: Sendable, Equatable {
        public var id: Int64
        public var why: Refusal

        public init(id: Int64, why: Refusal) {
            self.id = id
            self.why = why
        }
    }
}

extension ChurnStore {
    static let winbackColumns: PostgresQuery = """
        id, original_transaction_id, app_account_token, customer_ref, campaign, product_id, reason, offer_ids,
        not_before, expires_at, episode, status, claimed_by, claimed_at, claim_expires_at, created_at, opened_at,
        offer_id, holdout, outcome, outcome_reason, outcome_at, bundle_id
        """

    static func decodeWinbackEntry(_ row: PostgresRow) throws -> WinbackQueueEntry {
        let campaign = try row.decode(String.self, "campaign")
        let status = try row.decode(String.self, "status")
        guard let c = WinbackCampaign(rawValue: campaign), let s = WinbackQueueEntry.Status(rawValue: status) else {
            throw PostgresError(kind: .decoding, message: "winback_queue: unknown campaign \"\(campaign)\" or status \"\(status)\"")
        }
        return WinbackQueueEntry(
            id: try row.decode(Int64.self, "id"),
            originalTransactionId: try row.decode(String.self, "original_transaction_id"),
            appAccountToken: try row.decode(UUID?.self, "app_account_token"),
            customerRef: try row.decode(String?.self, "customer_ref"),
            campaign: c,
            productId: try row.decode(String?.self, "product_id"),
            reason: try row.decode(String.self, "reason"),
            offerIds: try row.decode([String].self, "offer_ids"),
            notBefore: try row.decode(Date.self, "not_before"),
            expiresAt: try row.decode(Date?.self, "expires_at"),
            episode: try row.decode(String.self, "episode"),
            status: s,
            claimedBy: try row.decode(String?.self, "claimed_by"),
            claimedAt: try row.decode(Date?.self, "claimed_at"),
            claimExpiresAt: try row.decode(Date?.self, "claim_expires_at"),
            createdAt: try row.decode(Date.self, "created_at"),
            openedAt: try row.decode(Date.self, "opened_at"),
            offerId: try row.decode(String?.self, "offer_id"),
            holdout: try row.decode(Bool.self, "holdout"),
            outcome: try row.decode(String?.self, "outcome"),
            outcomeReason: try row.decode(String?.self, "outcome_reason"),
            outcomeAt: try row.decode(Date?.self, "outcome_at"),
            bundleId: try row.decode(String.self, "bundle_id"))
    }

    /// Claims up to `limit` entries of `campaign` for `consumer` until `asOf + lease`.
    ///
    /// Claimable: pending, or claimed with a lapsed lease (a consumer that crashed), with
    /// `not_before <= asOf` and no `expires_at` at or before `asOf`; oldest `not_before` first.
    /// First, such entries past `expires_at` become `expired`. `FOR UPDATE SKIP LOCKED` in both
    /// steps: concurrent consumers never get the same entry and never wait on each other.
    /// `claimed_at` is `asOf` (the caller's clock, like every time here). `apps`: only entries of
    /// these apps (bundle ids); empty, of every app.
    public func winbackClaim(campaign: WinbackCampaign, consumer: String, limit: Int, lease: TimeInterval, asOf: Date,
                             apps: [String] = []) async throws -> WinbackClaim {
        let ofApps: PostgresQuery = "(cardinality(\(apps)::text[]) = 0 OR bundle_id = ANY(\(apps)::text[]))"
        return try await pool.withTransaction { db in
            let expired = try db.execute("""
                UPDATE churnwatch.winback_queue w SET status = 'expired', updated_at = now()
                FROM (
                    SELECT id FROM churnwatch.winback_queue
                    WHERE campaign = \(campaign.rawValue) AND expires_at <= \(asOf) AND \(ofApps)
                      AND (status = 'pending' OR (status = 'claimed' AND claim_expires_at < \(asOf)))
                    FOR UPDATE SKIP LOCKED
                ) AS gone
                WHERE w.id = gone.id
                """)
            let rows = try db.query("""
                WITH pick AS (
                    SELECT id FROM churnwatch.winback_queue
                    WHERE campaign = \(campaign.rawValue)
                      AND (status = 'pending' OR (status = 'claimed' AND claim_expires_at < \(asOf)))
                      AND not_before <= \(asOf)
                      AND (expires_at IS NULL OR expires_at > \(asOf)) AND \(ofApps)
                    ORDER BY not_before, id
                    LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED
                ), claimed AS (
                    UPDATE churnwatch.winback_queue w
                    SET status = 'claimed', claimed_by = \(consumer), claimed_at = \(asOf),
                        claim_expires_at = \(asOf) + make_interval(secs => \(lease)), updated_at = now()
                    FROM pick WHERE w.id = pick.id
                    RETURNING w.*
                )
                SELECT \(Self.winbackColumns) FROM claimed ORDER BY not_before, id
                """)
            return WinbackClaim(entries: try rows.map(Self.decodeWinbackEntry), expired: expired)
        }
    }

    /// Marks claimed entries `done`. With `consumer`, only entries it holds. The claim's lease
    /// is not checked: a message sent late is still sent, unless another consumer claimed the
    /// entry since (then the ack names it). Entries already done count as `alreadyDone`.
    public func winbackAck(ids: [Int64], consumer: String?) async throws -> WinbackSettlement {
        try await settle(ids: ids, consumer: consumer, change: """
            status = 'done', updated_at = now()
            """, acceptDone: true)
    }

    /// Gives claimed entries back: `pending` again, claim fields cleared. With `consumer`,
    /// only entries it holds.
    public func winbackRelease(ids: [Int64], consumer: String?) async throws -> WinbackSettlement {
        try await settle(ids: ids, consumer: consumer, change: """
            status = 'pending', claimed_by = NULL, claimed_at = NULL, claim_expires_at = NULL, updated_at = now()
            """, acceptDone: false)
    }

    private func settle(ids: [Int64], consumer: String?, change: PostgresQuery, acceptDone: Bool) async throws -> WinbackSettlement {
        let unique = Array(Set(ids)).sorted()
        guard !unique.isEmpty else { return WinbackSettlement() }
        return try await pool.withTransaction { db in
            var result = WinbackSettlement()
            result.settled = try db.query("""
                UPDATE churnwatch.winback_queue SET \(change)
                WHERE id = ANY(\(unique)) AND status = 'claimed'
                  AND (\(consumer)::text IS NULL OR claimed_by = \(consumer)::text)
                RETURNING id
                """).map { try $0.decode(Int64.self, "id") }.sorted()
            let settled = Set(result.settled)
            let rest = unique.filter { !settled.contains($0) }
            guard !rest.isEmpty else { return result }
            var found: [Int64: (WinbackQueueEntry.Status, String?)] = [:]
            for row in try db.query("SELECT id, status, claimed_by FROM churnwatch.winback_queue WHERE id = ANY(\(rest))") {
                guard let s = WinbackQueueEntry.Status(rawValue: try row.decode(String.self, "status")) else { continue }
                found[try row.decode(Int64.self, "id")] = (s, try row.decode(String?.self, "claimed_by"))
            }
            for id in rest {
                guard let (status, holder) = found[id] else {
                    result.refused.append(.init(id: id, why: .unknown))
                    continue
                }
                if status == .claimed, let holder {
                    result.refused.append(.init(id: id, why: .claimedByOther(holder)))
                } else if acceptDone, status == .done, consumer == nil || holder == consumer {
                    result.alreadyDone.append(id)
                } else {
                    result.refused.append(.init(id: id, why: .notClaimed(status)))
                }
            }
            return result
        }
    }

    /// Entries for operators, oldest first: optionally one campaign, one status, some apps.
    public func winbackList(campaign: WinbackCampaign?, status: WinbackQueueEntry.Status?, limit: Int,
                            apps: [String] = []) async throws -> [WinbackQueueEntry] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.winbackColumns) FROM churnwatch.winback_queue
                WHERE (\(campaign?.rawValue)::text IS NULL OR campaign = \(campaign?.rawValue)::text)
                  AND (\(status?.rawValue)::text IS NULL OR status = \(status?.rawValue)::text)
                  AND (cardinality(\(apps)::text[]) = 0 OR bundle_id = ANY(\(apps)::text[]))
                ORDER BY not_before, id
                LIMIT \(limit)
                """).map(Self.decodeWinbackEntry)
        }
    }
}
