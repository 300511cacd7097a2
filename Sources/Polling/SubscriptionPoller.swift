import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation

/// Asks Apple about one subscription and turns the verified answer into what the batch writer
/// stores: snapshot, events, segment and win-back decision. Spends the budget carefully: one
/// status call; a history call only when the stored history cannot explain the status (first
/// poll, a new latest transaction, a revocation, or `--full-history`), through Apple's revision
/// cursor; verifyReceipt only to learn the id of a subscriber registered with a receipt alone,
/// and when the Server API knows the id in neither environment.
public struct SubscriptionPoller: Sendable {
    public let client: AppStoreServerAPIClient
    public var policy: WinbackPolicy
    public var fullHistory: Bool

    public init(client: AppStoreServerAPIClient, policy: WinbackPolicy = .default, fullHistory: Bool = false) {
        self.client = client
        self.policy = policy
        self.fullHistory = fullHistory
    }

    public struct Result: Sendable {
        public var write: PollWrite
        /// Whose failure it is, when the poll failed (the write's class decides).
        public var failure: ItemFailureClass.Scope?
        /// Apple calls made, by endpoint.
        public var calls: [AppStoreEndpoint: Int]
        /// The App Store Server API knows the id in neither environment.
        var notFound = false
    }

    public func poll(_ item: ClaimedItem, asOf: Date) async -> Result {
        let receipt = item.receiptData.flatMap { $0.isEmpty ? nil : $0 }
        if let receipt, ReceiptRegistration.isPlaceholder(item.originalTransactionId) {
            // Registered with a receipt alone: verifyReceipt this once, to learn the id.
            return await pollReceipt(item, receipt: receipt, asOf: asOf)
        }
        let result = await pollServerAPI(item, asOf: asOf)
        guard let receipt, result.notFound else { return result }
        // The Server API knows the id in neither environment: the receipt is all there is.
        var fallback = await pollReceipt(item, receipt: receipt, asOf: asOf)
        fallback.calls.merge(result.calls, uniquingKeysWith: +)
        return fallback
    }

    // MARK: App Store Server API

    private func pollServerAPI(_ item: ClaimedItem, asOf: Date) async -> Result {
        let otid = item.originalTransactionId
        var calls: [AppStoreEndpoint: Int] = [:]
        // No environment registered (NULL): the configured one, at no extra call.
        let registered = item.environment ?? client.configuration.environment
        var attempts = 0
        let (statusOutcome, environment) = await client.withEnvironmentFallback(startingWith: registered) { env in
            attempts += 1
            return await client.subscriptionStatuses(for: otid, environment: env)
        }
        calls[.subscriptionStatuses, default: 0] += attempts
        let statuses: VerifiedSubscriptionStatuses
        switch statusOutcome {
        case .success(let v): statuses = v
        default: return failure(item, statusOutcome, endpoint: .subscriptionStatuses, calls: calls)
        }
        guard let entry = statuses.subscriptions.first(where: { ($0.originalTransactionId ?? $0.transaction.originalTransactionId) == otid })
                ?? statuses.subscriptions.first(where: { $0.transaction.originalTransactionId == otid }) else {
            // Each item is verified on its own: a neighbour's bad payload fails only the neighbour.
            if let mine = statuses.rejected.first(where: { $0.originalTransactionId == otid }) ?? statuses.rejected.first(where: { $0.originalTransactionId == nil }) {
                return failure(item, AppStoreOutcome<VerifiedSubscriptionStatuses>.verificationFailed(mine.failure, payload: mine.payload),
                               endpoint: .subscriptionStatuses, calls: calls)
            }
            return Result(write: PollWrite(item: item, outcome: .failed(.notFound, reason: "not found: the status answer has no subscription \(otid)")),
                          failure: .subscription, calls: calls)
        }
        guard let transaction = TransactionFacts(entry.transaction) else {
            return Result(write: PollWrite(item: item, outcome: .failed(.malformed, reason: "malformed: the latest transaction lacks ids or product")),
                          failure: .subscription, calls: calls)
        }
        let renewal = entry.renewalInfo.flatMap { RenewalFacts($0, originalTransactionId: otid) }
        // The latest transaction is stored again only when it is new or changed: on most nights
        // Apple re-signs the same transaction, and only its signedDate differs.
        var records: [TransactionRecord] = []
        if !Self.storedUnchanged(transaction, in: item.snapshot) {
            records.append(TransactionRecord(facts: transaction, payload: Self.signedPayload(entry.signedTransactionInfo) ?? Self.json(entry.transaction)))
        }

        // History only when the stored state cannot explain the answer.
        var history: [TransactionFacts]? = nil
        var revision: String? = nil
        var revoked: [TransactionFacts] = []
        let previous = item.snapshot
        let needsHistory = fullHistory || previous == nil || item.latestTransactionId != transaction.transactionId
            || (transaction.revocationDate != nil && previous?.revocationDate == nil)
            || (transaction.revocationDate == nil && previous?.revocationDate != nil)
        if needsHistory {
            let read: HistoryRead
            switch await readHistory(item, latest: transaction, environment: environment, calls: &calls) {
            case .read(let r): read = r
            case .failed(let result): return result
            }
            history = read.facts
            revision = read.revision
            records += read.records
            revoked = read.newlyRevoked
        }
        let snapshot = SubscriptionSnapshot(status: entry.rawStatus.map(Int.init), transaction: transaction, renewal: renewal,
                                            history: history, asOf: asOf)
        return Result(write: decide(item, snapshot: snapshot, environment: environment, revision: revision,
                                    receiptLatest: nil, records: records, asOf: asOf, revokedInHistory: revoked),
                      failure: nil, calls: calls)
    }

    // MARK: Deciding

    func decide(_ item: ClaimedItem, snapshot: SubscriptionSnapshot, environment: AppStoreEnvironment, revision: String?,
                        receiptLatest: String?, records: [TransactionRecord], asOf: Date,
                        revokedInHistory: [TransactionFacts] = []) -> PollWrite {
        Self.decide(item, snapshot: snapshot, environment: environment, revision: revision, receiptLatest: receiptLatest,
                    records: records, asOf: asOf, revokedInHistory: revokedInHistory, policy: policy)
    }

    /// What an observation of the subscription (a poll's answer, or a notification's signed
    /// data) changes: events, segment and win-back decision through ChurnModel, or nothing
    /// when it is older than the stored state.
    static func decide(_ item: ClaimedItem, snapshot: SubscriptionSnapshot, environment: AppStoreEnvironment, revision: String?,
                       receiptLatest: String?, records: [TransactionRecord], asOf: Date,
                       revokedInHistory: [TransactionFacts] = [], policy: WinbackPolicy) -> PollWrite {
        let previous = item.snapshot
        var detection = ChangeDetector.events(previous: previous, current: snapshot, asOf: asOf)
        // Refunds of earlier transactions that history reported (issue 19): events of their own.
        let earlier = ChangeDetector.earlierRevocations(in: revokedInHistory, previous: previous, current: snapshot, asOf: asOf)
        if !earlier.isEmpty {
            detection.events = (detection.events + earlier).sorted { $0.occurredAt < $1.occurredAt }
        }
        // A state the feed's first sync established: what happened before it is no event.
        if let since = item.establishedAt { detection.events.removeAll { $0.occurredAt <= since } }
        if detection.stale, let previous {
            var stale = PollWrite.Polled(snapshot: previous, stale: true, environment: environment, historyRevision: nil, receiptLatest: nil,
                                         transactions: [], events: [], segment: item.segment ?? SegmentState(.unknown, since: asOf),
                                         winback: WinbackDecision())
            // Placed between its neighbours at commit (a notification's stale answer is placed by the feed).
            stale.late = Observation(snapshot: snapshot, asOf: asOf)
            return PollWrite(item: item, outcome: .polled(stale))
        }
        let segment = SegmentState.next(previous: item.segment, snapshot: snapshot, asOf: asOf)
        let winback = WinbackPlanner.decide(previous: previous, current: snapshot, asOf: asOf, policy: policy)
        var polled = PollWrite.Polled(snapshot: snapshot, stale: false, environment: environment, historyRevision: revision,
                                      receiptLatest: receiptLatest, transactions: records, events: detection.events, segment: segment,
                                      winback: winback)
        polled.observedAsOf = asOf
        return PollWrite(item: item, outcome: .polled(polled))
    }

    func failure<T>(_ item: ClaimedItem, _ outcome: AppStoreOutcome<T>, endpoint: AppStoreEndpoint,
                            calls: [AppStoreEndpoint: Int]) -> Result {
        var (reason, cls) = AppleAnswer.classify(outcome)
        var quarantine: [QuarantinedPayload] = []
        switch outcome {
        case .notFound: reason += " in every environment"
        case .verificationFailed(let why, let payload):
            quarantine.append(QuarantinedPayload(endpoint: endpoint.rawValue, reason: "\(why)", payload: payload))
        default: break
        }
        var result = Result(write: PollWrite(item: item, outcome: .failed(cls, reason: reason), quarantine: quarantine),
                            failure: cls.scope, calls: calls)
        if case .notFound = outcome { result.notFound = true }
        return result
    }

    /// True when the stored snapshot already describes `transaction` as it is now (same id,
    /// period, revocation, upgrade, offer and price): its transactions row needs no rewrite.
    static func storedUnchanged(_ transaction: TransactionFacts, in snapshot: SubscriptionSnapshot?) -> Bool {
        guard let s = snapshot else { return false }
        return s.transactionId == transaction.transactionId && s.productId == transaction.productId
            && s.periodStart == transaction.purchaseDate && s.periodEnd == transaction.expiresDate
            && s.revocationDate == transaction.revocationDate && s.rawRevocationReason == transaction.revocationReason
            && s.rawRevocationType == transaction.revocationType && s.isUpgraded == transaction.isUpgraded
            && s.rawOfferType == transaction.offerType && s.offerIdentifier == transaction.offerIdentifier
            && s.rawOfferDiscountType == transaction.offerDiscountType && s.price == transaction.price
            && s.currency == transaction.currency && s.rawTransactionReason == transaction.transactionReason
            && s.rawOwnershipType == transaction.inAppOwnershipType && s.appAccountToken == transaction.appAccountToken
    }

    /// The payload of a verified JWS exactly as Apple signed it (JSON with Apple's field names,
    /// new fields included): stored as is, without decoding and encoding it again.
    static func signedPayload(_ jws: String) -> StoredJSON? {
        var jws = jws
        let bytes = jws.withUTF8 { utf8 -> [UInt8]? in
            CompactJWS.dots(in: utf8).flatMap { Base64URL.decode(utf8: utf8[($0.first + 1)..<$0.second]) }
        }
        return bytes.map { StoredJSON(text: String(decoding: $0, as: UTF8.self)) }
    }

    static func json<T: Encodable>(_ value: T) -> StoredJSON {
        (try? StoredJSON(encoding: value)) ?? .emptyObject
    }
}
