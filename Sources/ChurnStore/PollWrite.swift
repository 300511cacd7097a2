import AppStoreModels
import ChurnModel
import Foundation

/// A verified transaction to keep in `churnwatch.transactions`.
public struct TransactionRecord: Sendable {
    public var facts: TransactionFacts
    /// The decoded payload as JSON (Apple's field names).
    public var payload: StoredJSON

    public init(facts: TransactionFacts, payload: StoredJSON) {
        self.facts = facts
        self.payload = payload
    }
}

/// What polling one subscription produced; written with its batch in one transaction.
public struct PollWrite: Sendable {
    public struct Polled: Sendable {
        /// The verified snapshot (for a stale answer: the stored one, unchanged).
        public var snapshot: SubscriptionSnapshot
        /// Apple's answer was older than the stored state: only poll times are written.
        public var stale: Bool
        /// The environment that answered (corrects a wrong registration).
        public var environment: AppStoreEnvironment
        public var historyRevision: String?
        public var receiptLatest: String?
        public var transactions: [TransactionRecord]
        public var events: [ChurnEvent]
        public var segment: SegmentState
        public var winback: WinbackDecision
        /// The moment the observation's undated events were dated at (a notification's
        /// `signedDate`, a poll's moment), and the change a notification names: kept with the
        /// state, so a late observation can be placed before it (``ObservationSequence``).
        public var observedAsOf: Date?
        public var named: ChurnEventType?
        /// A stale answer's own observation: placed in the subscription's sequence by its
        /// `signedDate` at commit (``ObservationSequence``).
        public var late: Observation?

        public init(snapshot: SubscriptionSnapshot, stale: Bool, environment: AppStoreEnvironment, historyRevision: String?,
                    receiptLatest: String?, transactions: [TransactionRecord], events: [ChurnEvent],
                    segment: SegmentState, winback: WinbackDecision) {
            self.snapshot = snapshot
            self.stale = stale
            self.environment = environment
            self.historyRevision = historyRevision
            self.receiptLatest = receiptLatest
            self.transactions = transactions
            self.events = events
            self.segment = segment
            self.winback = winback
        }
    }

    public enum Outcome: Sendable {
        case polled(Polled)
        /// The class is stored on the item (`run_items.failure_class`); the reason's prose on the
        /// item (`outcome`) and the subscription (`last_error`). The stored state is untouched.
        case failed(ItemFailureClass, reason: String)
    }

    public var item: ClaimedItem
    public var outcome: Outcome
    public var quarantine: [QuarantinedPayload]
    /// The real id a subscriber registered with a receipt alone turned out to have: its row is
    /// re-keyed to it (``ReceiptRegistration``).
    public var learnedOriginalTransactionId: String?

    public init(item: ClaimedItem, outcome: Outcome, quarantine: [QuarantinedPayload] = [],
                learnedOriginalTransactionId: String? = nil) {
        self.item = item
        self.outcome = outcome
        self.quarantine = quarantine
        self.learnedOriginalTransactionId = learnedOriginalTransactionId
    }
}
