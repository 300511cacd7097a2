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
}
