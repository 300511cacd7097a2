import AppStoreModels
import ChurnModel
import Foundation

/// What a notification says about a refund request, for `churnwatch.refund_requests`.
public enum RefundNotice: Sendable, Equatable {
    /// A `CONSUMPTION_REQUEST`: Apple asks for consumption information until 12 hours on.
    case request(RefundRequestNotice)
    /// Apple's decision (`REFUND`: refunded, `REFUND_DECLINED`: declined) about a transaction.
    case decision(transactionId: String, originalTransactionId: String, decision: RefundDecision, at: Date)

    public var originalTransactionId: String {
        switch self {
        case .request(let r): r.originalTransactionId
        case .decision(_, let otid, _, _): otid
        }
    }
}

/// Apple's decision on a refund request (`refund_requests.decision`).
public enum RefundDecision: String, Sendable, CaseIterable, Codable {
    case refunded
    case declined
}

/// A `CONSUMPTION_REQUEST` as the feed read it: the transaction whose refund was asked for, from
/// its signed transaction info.
public struct RefundRequestNotice: Sendable, Equatable {
    public var notificationUUID: UUID
    public var originalTransactionId: String
    public var transactionId: String
    public var environment: AppStoreEnvironment
    /// Apple's `consumptionRequestReason`, as sent.
    public var reason: String?
    /// The notification's `signedDate`.
    public var requestedAt: Date
    public var periodStart: Date?
    public var periodEnd: Date?

    public init(notificationUUID: UUID, originalTransactionId: String, transactionId: String, environment: AppStoreEnvironment,
                reason: String?, requestedAt: Date, periodStart: Date?, periodEnd: Date?) {
        self.notificationUUID = notificationUUID
        self.originalTransactionId = originalTransactionId
        self.transactionId = transactionId
        self.environment = environment
        self.reason = reason
        self.requestedAt = requestedAt
        self.periodStart = periodStart
        self.periodEnd = periodEnd
    }

    public var deadline: Date { requestedAt.addingTimeInterval(RefundAnswerPolicy.answerWindow) }
}

/// A refund request claimed for answering, with what the app recorded about its customer.
public struct ClaimedRefundRequest: Sendable, Equatable {
    public var notificationUUID: UUID
    public var originalTransactionId: String
    public var transactionId: String
    public var environment: AppStoreEnvironment
    public var facts: RefundRequestFacts
    /// nil: no row in `churnwatch.refund_consent` for this customer.
    public var consent: RefundConsent?
    /// Attempts so far, this one included.
    public var attempts: Int
}

/// The state of a refund request (`refund_requests.state`).
public enum RefundRequestState: String, Sendable, CaseIterable, Codable {
    /// Read, not answered yet.
    case pending
    /// Claimed by a sync that is sending the answer (until `lease_until`).
    case sending
    /// Apple accepted the answer (202).
    case answered
    /// Nothing was sent, by the policy: no consent, or the deadline passed.
    case notSent = "not_sent"
    /// Apple refused the answer (a 4xx that stays wrong): `last_error` says why.
    case failed
}

/// What became of one attempt to answer, as recorded.
public enum RefundAttemptResult: Sendable, Equatable {
    /// Apple accepted `body` (sent at `sentAt`, before the deadline).
    case answered(body: StoredJSON, branch: RefundBranch, sentAt: Date, status: Int)
    /// The policy sends nothing.
    case notSent(RefundBranch)
    /// A temporary failure (or a sync stopping before it sent): back to pending, tried again by
    /// the next sync before the deadline.
    case retry(body: StoredJSON?, branch: RefundBranch?, error: String)
    /// Apple refused it for good.
    case failed(body: StoredJSON?, branch: RefundBranch, status: Int?, error: String)
}

/// One row of `churnwatch.refund_requests`, as `churnwatch refunds` lists it.
public struct RefundRequestRow: Sendable, Equatable, Codable {
    public var notificationUUID: UUID
    public var originalTransactionId: String
    public var transactionId: String
    public var environment: String
    public var reason: String?
    public var requestedAt: Date
    public var deadline: Date
    public var state: String
    public var policyBranch: String?
    public var attempts: Int
    public var answeredAt: Date?
    public var appleStatus: Int?
    public var lastError: String?
    public var decision: String?
    public var decidedAt: Date?
}
