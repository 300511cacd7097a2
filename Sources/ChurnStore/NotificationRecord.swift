import AppStoreModels
import ChurnModel
import Foundation

/// How a notification reached churnwatch (`churnwatch.notifications.source`).
public enum NotificationSource: String, Sendable, CaseIterable {
    /// Apple's Get Notification History, read by the sync.
    case history
    /// `churnwatch notifications ingest FILE|-`.
    case ingest
    /// A row of `churnwatch.notification_inbox`, inserted by the app's backend.
    case inbox
}

/// What became of a notification.
public enum NotificationOutcome: String, Sendable, CaseIterable {
    /// Its transaction and renewal info were applied as an observation of the subscription.
    case applied
    /// Its `notificationUUID` was already recorded: nothing was done (counted, not stored again).
    case duplicate
    /// The stored state was observed later than the notification was signed: nothing changed.
    case stale
    /// It failed verification: kept in `churnwatch.quarantine`, never trusted.
    case quarantined
    /// Verified, but about nothing churnwatch follows (a test, a consumption request, a
    /// one-time purchase): recorded only.
    case ignored
}

/// One row of `churnwatch.notifications` (docs/contracts.md "Change feed").
public struct NotificationRecord: Sendable, Equatable {
    /// Apple's `notificationUUID`; nil for a quarantined payload (nobody verified its claim).
    public var uuid: UUID?
    public var type: String?
    public var subtype: String?
    public var signedDate: Date?
    public var originalTransactionId: String?
    /// The environment the notification says it is from; nil for a quarantined payload.
    public var environment: AppStoreEnvironment?
    public var source: NotificationSource
    /// Never ``NotificationOutcome/duplicate``: a duplicate is not stored again.
    public var outcome: NotificationOutcome
    public var reason: String?
    /// A quarantined payload's SHA-256 (hex), recorded once (`payload_sha256`).
    public var payloadDigest: String?

    public init(uuid: UUID?, type: String?, subtype: String?, signedDate: Date?, originalTransactionId: String?,
                environment: AppStoreEnvironment?, source: NotificationSource, outcome: NotificationOutcome, reason: String? = nil,
                payloadDigest: String? = nil) {
        self.payloadDigest = payloadDigest
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.signedDate = signedDate
        self.originalTransactionId = originalTransactionId
        self.environment = environment
        self.source = source
        self.outcome = outcome
        self.reason = reason
    }
}

/// Where the sync of Apple's notification history stands for one environment
/// (`churnwatch.notification_feed`).
public struct FeedState: Sendable, Equatable {
    public var cursor = FeedCursor()
    /// When the last sync finished; nil before the first.
    public var lastSyncAt: Date?
    public var lastSyncRecords = 0
    public var recordsTotal: Int64 = 0

    public init(cursor: FeedCursor = FeedCursor(), lastSyncAt: Date? = nil, lastSyncRecords: Int = 0, recordsTotal: Int64 = 0) {
        self.cursor = cursor
        self.lastSyncAt = lastSyncAt
        self.lastSyncRecords = lastSyncRecords
        self.recordsTotal = recordsTotal
    }
}

/// What one commit of the feed writes besides the observations: the notifications' rows, the
/// subscriptions they register, and the inbox rows they came from.
public struct FeedBatch: Sendable {
    public var writes: [PollWrite] = []
    /// Of `writes`, the subscriptions whose state the first sync establishes (`established_at`).
    public var established: [String] = []
    public var records: [NotificationRecord] = []
    /// Subscriptions first heard of through a notification: (id, environment, app account token).
    public var register: [(id: String, environment: AppStoreEnvironment, appAccountToken: UUID?)] = []
    /// Inbox rows handled by this batch, with what became of each.
    public var inbox: [(id: Int64, outcome: NotificationOutcome)] = []
    /// The subscription each of those inbox rows is about, where it is about one.
    public var inboxSubscription: [Int64: String] = [:]
    /// Payloads that failed verification.
    public var quarantine: [(originalTransactionId: String?, payload: QuarantinedPayload)] = []
    /// Refund requests and Apple's decisions on them (`churnwatch.refund_requests`).
    public var refunds: [RefundNotice] = []
    /// Notifications signed before the stored state: placed in their subscription's sequence by
    /// their `signedDate` at commit (``ObservationSequence``). Their rows say `applied`, or
    /// `stale` where one cannot be placed.
    public var late: [Late] = []

    public struct Late: Sendable {
        public var originalTransactionId: String
        public var observation: Observation
        /// A notification's UUID (its row in `records`) and, from the inbox, its inbox row; nil
        /// for a poll's answer.
        public var uuid: UUID?
        public var inboxId: Int64?

        public init(originalTransactionId: String, observation: Observation, uuid: UUID?, inboxId: Int64?) {
            self.originalTransactionId = originalTransactionId
            self.observation = observation
            self.uuid = uuid
            self.inboxId = inboxId
        }
    }

    public init() {}

    public var isEmpty: Bool {
        writes.isEmpty && records.isEmpty && inbox.isEmpty && quarantine.isEmpty && refunds.isEmpty && late.isEmpty
    }

    /// This batch without anything about `subscriptions` (their observations, notification rows
    /// and inbox rows): what is left to commit when another writer changed them meanwhile.
    public func without(_ subscriptions: Set<String>) -> FeedBatch {
        guard !subscriptions.isEmpty else { return self }
        var b = self
        b.writes.removeAll { subscriptions.contains($0.item.originalTransactionId) }
        b.established.removeAll { subscriptions.contains($0) }
        b.records.removeAll { $0.originalTransactionId.map(subscriptions.contains) ?? false }
        b.inbox.removeAll { b.inboxSubscription[$0.id].map(subscriptions.contains) ?? false }
        b.refunds.removeAll { subscriptions.contains($0.originalTransactionId) }
        b.late.removeAll { subscriptions.contains($0.originalTransactionId) }
        return b
    }
}

/// The feed as `status`, `plan` and the metrics file show it.
public struct FeedStatus: Sendable, Equatable {
    public var state: FeedState
    /// Notifications recorded in the last 24 hours before `asOf`, by outcome.
    public var last24h: [NotificationOutcome: Int]
    public var inboxPending: Int
    /// Any verified notification was ever recorded: planning is feed-driven (else the windows alone).
    public var hasNotifications: Bool

    public init(state: FeedState, last24h: [NotificationOutcome: Int], inboxPending: Int, hasNotifications: Bool) {
        self.state = state
        self.last24h = last24h
        self.inboxPending = inboxPending
        self.hasNotifications = hasNotifications
    }
}
