import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation

/// One notification given to the change feed, with what verification made of it.
public struct FeedInput: Sendable {
    public enum Verdict: Sendable {
        case verified(VerifiedNotification)
        /// Why it was not trusted.
        case rejected(String)
    }

    public var signedPayload: String
    public var verdict: Verdict
    public var source: NotificationSource
    /// The inbox row it came from.
    public var inboxId: Int64?
    /// A rejected payload's SHA-256 (hex): the same bad payload read again (the history's
    /// overlap, a file ingested twice) is a duplicate, not a second quarantine entry.
    public var digest: String?

    public init(signedPayload: String, verdict: Verdict, source: NotificationSource, inboxId: Int64? = nil, digest: String? = nil) {
        self.signedPayload = signedPayload
        self.verdict = verdict
        self.source = source
        self.inboxId = inboxId
        self.digest = digest
    }
}

/// What the feed does with a set of notifications, decided from what is already stored; no
/// I/O. A verified notification's transaction and renewal info are an observation of the
/// subscription at its `signedDate`, decided by the same rules as a poll's answer
/// (``SubscriptionPoller/decide(_:snapshot:environment:revision:receiptLatest:records:asOf:revokedInHistory:policy:)``):
/// the same events, segments and win-back decisions, in `signedDate` order, and an older
/// observation never overwrites a newer state.
public struct FeedApplier: Sendable {
    public var policy: WinbackPolicy

    public init(policy: WinbackPolicy = .default) { self.policy = policy }

    /// The reason recorded on every notification a first sync applies (`notifications.reason`).
    public static let establishedReason = "established by the first sync"
    /// The reason recorded on a notification signed before the stored state and placed in the
    /// subscription's sequence by its `signedDate` (``ObservationSequence``).
    public static let lateReason = "signed before the stored state: placed by its signedDate"

    /// The commits for `inputs`, in order: the k-th holds the k-th notification of each
    /// subscription (so a commit never writes one subscription twice); the first also holds
    /// the rows of everything not applied.
    public struct Plan: Sendable {
        public var batches: [FeedBatch]
        public var duplicates = 0
        /// Rejected payloads already quarantined (or twice in `inputs`): rejected again, kept once.
        public var quarantinedAgain = 0
    }

    /// - Parameters:
    ///   - known: notification UUIDs already recorded.
    ///   - knownRejected: digests of rejected payloads already recorded.
    ///   - stored: the stored state of the subscriptions the notifications are about (absent: unknown).
    ///   - neverPolled: of `stored`, those never polled (any state they have came from the feed).
    ///   - establishOnly: the first sync of a database: a subscription never polled takes its
    ///     newest notification's state as a first poll would, without events (what happened
    ///     before churnwatch knew it must not flood the log); one polled before gets its news.
    ///   - now: the sync's moment: a subscription established by the first sync takes its
    ///     newest notification's state as its state now (segment and win-back entries dated
    ///     now, as a first poll's would be).
    public func plan(_ inputs: [FeedInput], known: Set<UUID>, knownRejected: Set<String> = [], stored: [String: ClaimedItem],
                     neverPolled: Set<String> = [], establishOnly: Bool, now: Date) -> Plan {
        var first = FeedBatch()
        var duplicates = 0, quarantinedAgain = 0
        var seen = Set<UUID>()
        var seenRejected = knownRejected
        var bySubscription: [String: [(VerifiedNotification, FeedInput, UUID)]] = [:]
        for input in inputs {
            let v: VerifiedNotification
            switch input.verdict {
            case .rejected(let reason):
                if let digest = input.digest, !seenRejected.insert(digest).inserted {
                    quarantinedAgain += 1
                    if let id = input.inboxId { first.inbox.append((id, .quarantined)) }
                    continue
                }
                first.quarantine(input, reason: reason)
                continue
            case .verified(let verified): v = verified
            }
            guard let uuid = UUID(uuidString: v.notificationUUID) else {
                first.quarantine(input, reason: "notificationUUID \(v.notificationUUID) is not a UUID")
                continue
            }
            guard !known.contains(uuid), seen.insert(uuid).inserted else {
                duplicates += 1
                if let id = input.inboxId { first.inbox.append((id, .duplicate)) }
                continue
            }
            guard let otid = v.originalTransactionId, let tx = v.transaction, tx.expiresDate != nil || v.renewalInfo != nil else {
                first.record(v, uuid, input, outcome: .ignored, reason: "about no auto-renewable subscription")
                continue
            }
            bySubscription[otid, default: []].append((v, input, uuid))
        }
        var batches = [first]
        for otid in bySubscription.keys.sorted() {
            let list = bySubscription[otid]!.sorted { ($0.0.signedDate, $0.2.uuidString) < ($1.0.signedDate, $1.2.uuidString) }
            var item = stored[otid] ?? .unregistered(otid, environment: list[0].0.environment,
                                                     appAccountToken: list[0].0.transaction?.appAccountTokenUUID)
            if stored[otid] == nil {
                batches[0].register.append((otid, list[0].0.environment, item.appAccountToken))
            }
            // Established, not compared: the newest notification's state, no events, no win-back
            // (what the state calls for now is enqueued once the first sync has read its window
            // through: ``establishedWinback(_:now:)``). Every notification's transaction is kept,
            // so where a batch ends (a sync cut short and resumed) changes nothing in the end.
            let quiet = establishOnly && (stored[otid] == nil || neverPolled.contains(otid))
            if quiet {
                var earlier: [TransactionRecord] = []
                for (v, input, uuid) in list.dropLast() {
                    earlier += Self.transactionRecord(v).map { [$0] } ?? []
                    batches[0].record(v, uuid, input, outcome: .applied, reason: Self.establishedReason)
                }
                let (v, input, uuid) = list.last!
                observe(v, uuid, input, item: &item, quiet: now, earlier: earlier, into: &batches[0])
                continue
            }
            var written: [(batch: Int, write: Int)] = []
            for (k, (v, input, uuid)) in list.enumerated() {
                if k == batches.count { batches.append(FeedBatch()) }
                if observe(v, uuid, input, item: &item, quiet: nil, into: &batches[k]) { written.append((k, batches[k].writes.count - 1)) }
            }
            openWinback(written, before: stored[otid]?.snapshot, after: item.snapshot, now: now, in: &batches)
        }
        return Plan(batches: batches.filter { !$0.isEmpty }, duplicates: duplicates, quarantinedAgain: quarantinedAgain)
    }

    /// The notification's transaction as a row of `churnwatch.transactions` (nil: it lacks ids or product).
    static func transactionRecord(_ v: VerifiedNotification) -> TransactionRecord? {
        guard let tx = v.transaction, let facts = TransactionFacts(tx) else { return nil }
        let signed = v.payload.data?.signedTransactionInfo.flatMap(SubscriptionPoller.signedPayload)
        return TransactionRecord(facts: facts, payload: signed ?? SubscriptionPoller.json(tx))
    }

    /// Win-back entries are decided once per subscription and sync: for the state the sync leaves
    /// it in, at the sync's moment (`now`), against the state before the sync. Risk that exists
    /// now opens an entry; an episode the notifications open and close before the sync (auto-renew
    /// off in the morning, on again at noon; a history replayed) opens none.
    private func openWinback(_ written: [(batch: Int, write: Int)], before: SubscriptionSnapshot?, after: SubscriptionSnapshot?,
                             now: Date, in batches: inout [FeedBatch]) {
        guard let last = written.last, let after else { return }
        for (k, i) in written { batches[k].writes[i].setWinback(WinbackDecision()) }
        batches[last.batch].writes[last.write].setWinback(WinbackPlanner.decide(previous: before, current: after, asOf: now, policy: policy))
    }

    /// One notification as an observation of `item`, which becomes the state it leaves (true:
    /// a write was added to `batch`). `quiet`: establish the state as of this moment, without
    /// events or win-back entries (the first sync); `earlier`: the transactions of the
    /// notifications it stands for.
    @discardableResult
    private func observe(_ v: VerifiedNotification, _ uuid: UUID, _ input: FeedInput, item: inout ClaimedItem, quiet: Date?,
                         earlier: [TransactionRecord] = [], into batch: inout FeedBatch) -> Bool {
        guard let record = Self.transactionRecord(v) else {
            batch.record(v, uuid, input, outcome: .ignored, reason: "its transaction lacks ids or product")
            return false
        }
        let facts = record.facts
        let at = v.signedDate.date
        let renewal = v.renewalInfo.flatMap { RenewalFacts($0, originalTransactionId: item.originalTransactionId) }
        let snapshot = SubscriptionSnapshot(status: v.payload.data?.rawStatus.map(Int.init), transaction: facts, renewal: renewal,
                                            history: nil, asOf: at)
        var records = earlier
        if quiet != nil || !SubscriptionPoller.storedUnchanged(facts, in: item.snapshot) { records.append(record) }
        let asOf = quiet.map { max($0, at) } ?? at
        let named = NotifiedChange.event(notificationType: v.notificationType, subtype: v.subtype)
        var write = SubscriptionPoller.decide(item, snapshot: snapshot, environment: v.environment, revision: nil,
                                              receiptLatest: nil, records: records, asOf: asOf, policy: policy)
        guard case .polled(var polled) = write.outcome, !polled.stale else {
            // Older than the stored state: placed between its neighbours at commit (a first
            // sync's, which logs nothing, is stale as before).
            guard quiet == nil else {
                batch.record(v, uuid, input, outcome: .stale, reason: "the stored state was signed later")
                return false
            }
            batch.late.append(.init(originalTransactionId: item.originalTransactionId,
                                    observation: Observation(snapshot: snapshot, asOf: at, named: named), uuid: uuid, inboxId: input.inboxId))
            batch.record(v, uuid, input, outcome: .applied, reason: FeedApplier.lateReason)
            return false
        }
        polled.observedAsOf = asOf
        polled.named = named
        if quiet != nil {
            polled.events = []
            polled.winback = WinbackDecision()
            write.outcome = .polled(polled)
            batch.established.append(item.originalTransactionId)
        } else {
            polled.events = NotifiedChange.completing(polled.events, named: named, previous: item.snapshot, current: polled.snapshot,
                                                      signedDate: at)
            if let since = item.establishedAt { polled.events.removeAll { $0.occurredAt <= since } }
            write.outcome = .polled(polled)
        }
        batch.writes.append(write)
        // Every notification a first sync applies says so, the last of a subscription's too,
        // wherever its batches were cut (a first sync stopped and resumed writes the same rows).
        batch.record(v, uuid, input, outcome: .applied, reason: quiet == nil ? nil : FeedApplier.establishedReason)
        item.snapshot = polled.snapshot
        item.segment = polled.segment
        item.latestTransactionId = facts.transactionId
        item.stateVersion += 1
        return true
    }
}

extension FeedApplier {
    /// The win-back entries that subscriptions established by a first sync call for at `now`,
    /// as a first poll's would be (risk that exists tonight, not the past the history replayed).
    public func establishedWinback(_ items: [ClaimedItem], now: Date) -> [(entry: WinbackEntry, item: ClaimedItem)] {
        items.flatMap { item -> [(entry: WinbackEntry, item: ClaimedItem)] in
            guard let snapshot = item.snapshot else { return [] }
            return WinbackPlanner.decide(previous: nil, current: snapshot, asOf: now, policy: policy).entries.map { ($0, item) }
        }
    }
}

extension PollWrite {
    /// Replaces the win-back decision of a polled subscription's write.
    mutating func setWinback(_ decision: WinbackDecision) {
        guard case .polled(var polled) = outcome else { return }
        polled.winback = decision
        outcome = .polled(polled)
    }
}

extension FeedBatch {
    mutating func record(_ v: VerifiedNotification, _ uuid: UUID, _ input: FeedInput, outcome: NotificationOutcome, reason: String? = nil) {
        records.append(NotificationRecord(
            uuid: uuid, type: v.notificationType, subtype: v.subtype, signedDate: v.signedDate.date,
            originalTransactionId: v.originalTransactionId, environment: v.environment,
            source: input.source, outcome: outcome, reason: reason))
        if let id = input.inboxId {
            inbox.append((id, outcome))
            inboxSubscription[id] = v.originalTransactionId
        }
        if let notice = RefundNotice(v, uuid: uuid) { refunds.append(notice) }
    }

    mutating func quarantine(_ input: FeedInput, reason: String) {
        let kept = QuarantinedPayload(endpoint: "notification", reason: reason, payload: input.signedPayload)
        records.append(NotificationRecord(uuid: nil, type: nil, subtype: nil, signedDate: nil, originalTransactionId: nil,
                                          environment: nil, source: input.source, outcome: .quarantined, reason: kept.reason,
                                          payloadDigest: input.digest))
        quarantine.append((nil, kept))
        if let id = input.inboxId { inbox.append((id, .quarantined)) }
    }
}
