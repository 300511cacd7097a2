import AppStoreModels
import ChurnModel
import Foundation
import Postgres

/// One work item a worker claimed, with what the store knows of its subscription.
public struct ClaimedItem: Sendable {
    public var originalTransactionId: String
    public var reason: String
    public var attempts: Int
    /// Production or Sandbox, as registered (or as corrected by an earlier poll); nil when
    /// registered without one: the configured environment (APPSTORE_ENVIRONMENT).
    public var environment: AppStoreEnvironment?
    public var receiptData: String?
    public var appAccountToken: UUID?
    public var customerRef: String?
    /// The last verified snapshot; nil before the first successful poll.
    public var snapshot: SubscriptionSnapshot?
    public var segment: SegmentState?
    public var latestTransactionId: String?
    public var historyRevision: String?
    /// Live win-back episodes (pending or claimed) of this subscription.
    public var liveEpisodes: [WinbackEpisode]
    /// Set when the stored state was established by the change feed's first sync and not
    /// polled since: events dated at or before it are not written (`subscriptions.established_at`).
    public var establishedAt: Date? = nil
    /// The version of the stored state this item was read with (`subscriptions.state_version`):
    /// a write decided from it lands only while the row still holds it.
    public var stateVersion: Int64 = 0

    /// A write decided from no stored state of its own row (a receipt's placeholder re-keyed to
    /// the id it learned): it lands whatever version the row holds.
    static let anyVersion: Int64 = -1
}

extension ChurnStore {
    static func decodeClaimed(_ row: PostgresRow, _ decoder: JSONDecoder) throws -> ClaimedItem {
        let snapshot = try row.decode(PostgresJSON?.self, "snapshot").map {
            try decoder.decode(SubscriptionSnapshot.self, from: $0.data)
        }
        let segment: SegmentState? = try row.decode(String?.self, "segment").flatMap(Segment.init(rawValue:)).map {
            SegmentState($0, since: try row.decode(Date.self, "segment_since"))
        }
        let live = try row.decode([String].self, "live").compactMap { text -> WinbackEpisode? in
            let parts = text.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let c = WinbackCampaign(rawValue: String(parts[0])) else { return nil }
            return WinbackEpisode(campaign: c, key: String(parts[1]))
        }
        return ClaimedItem(
            originalTransactionId: try row.decode(String.self, "original_transaction_id"),
            reason: try row.decode(String.self, "reason"),
            attempts: try row.decode(Int.self, "attempts"),
            environment: try row.decode(String?.self, "environment").flatMap(AppStoreEnvironment.init(rawValue:)),
            receiptData: try row.decode(String?.self, "receipt_data"),
            appAccountToken: try row.decode(UUID?.self, "app_account_token"),
            customerRef: try row.decode(String?.self, "customer_ref"),
            snapshot: snapshot,
            segment: segment,
            latestTransactionId: try row.decode(String?.self, "latest_transaction_id"),
            historyRevision: try row.decode(String?.self, "history_revision"),
            liveEpisodes: live,
            establishedAt: try row.decode(Date?.self, "established_at"),
            stateVersion: try row.decode(Int64.self, "state_version"))
    }
}
