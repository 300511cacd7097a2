import ChurnModel
import Foundation
import Postgres

/// What a batch commit wrote.
public struct BatchCounts: Sendable, Equatable {
    public var polled = 0
    public var failed = 0
    public var events = 0
    public var enqueued = 0
    public var obsoleted = 0
    public var quarantined = 0
    /// Polled subscriptions another writer changed between the claim and this commit (a change
    /// feed sync beside the run): nothing of theirs was written, and their items went back to
    /// pending, to be polled again from the state that writer left.
    public var conflicted: [String] = []
}

extension ChurnStore {
    /// Commits a batch in one transaction: snapshots, new transactions, events, segments,
    /// win-back entries (created at most once per subscription, campaign and episode) and
    /// obsolete ones, quarantined payloads, and the items' outcomes. Idempotent: a batch
    /// written twice (a lease that expired under a slow worker) adds nothing the second time.
    /// One statement per table, each over the whole batch (no round trip per item).
    @discardableResult
    public func pollResultsCommit(runId: Int64, asOf: Date, detectedAt: Date, _ writes: [PollWrite]) async throws -> BatchCounts {
        guard !writes.isEmpty else { return BatchCounts() }
        // Everything is turned into column arrays before the transaction starts.
        let all = try PollBatch(writes)
        return try await pool.withTransaction { db in
            var counts = BatchCounts()
            try Self.adoptLearnedIds(db, placeholders: all.renamedFrom, learned: all.renamedTo)
            let (written, conflicted) = try Self.subscriptionsWritePolled(db, all.subscriptions, ids: all.polledIds,
                                                                          environments: all.polledEnvironments, detectedAt: detectedAt)
            // The rare conflict: the batch again without those subscriptions, whose items are polled again.
            let b = conflicted.isEmpty ? all : try PollBatch(writes.filter { !conflicted.contains($0.subscriptionItem.originalTransactionId) })
            let retried = writes.filter { conflicted.contains($0.subscriptionItem.originalTransactionId) }.map(\.item.originalTransactionId)
            counts.polled = written - conflicted.count
            counts.conflicted = retried
            counts.failed = try Self.subscriptionsWriteFailed(db, ids: b.failedIds, reasons: b.failedReasons, detectedAt: detectedAt)
            (counts.events, counts.obsoleted, counts.enqueued) = try Self.observationsWrite(db, app: app, b, runId: runId, asOf: asOf,
                                                                                           detectedAt: detectedAt)
            counts.events += try Self.lateObservationsPlace(db, app: app, b.late, runId: runId, detectedAt: detectedAt).events
            counts.quarantined = try Self.quarantineInsert(db, app: app, b.quarantine, runId: runId)
            try Self.runItemsFinish(db, b, runId: runId)
            try Self.runItemsRetry(db, runId: runId, ids: retried)
            return counts
        }
    }

    /// Items whose poll lost a race with another writer go back to pending (without counting
    /// the claim as an attempt): they are claimed and polled again.
    static func runItemsRetry(_ db: PostgresConnection, runId: Int64, ids: [String]) throws {
        guard !ids.isEmpty else { return }
        try db.execute("""
            UPDATE churnwatch.run_items SET status = 'pending', claimed_by = NULL, lease_until = NULL,
                attempts = greatest(attempts - 1, 0)
            WHERE run_id = \(runId) AND original_transaction_id = ANY(\(ids)::text[]) AND status = 'claimed'
            """)
    }
}

extension ChurnStore {
    /// What a poll's batch and a change-feed commit both write after the subscriptions' rows:
    /// transactions, events, segments, retention outcomes and win-back entries. Returns the
    /// events written, the win-back entries made obsolete and those enqueued.
    static func observationsWrite(_ db: PostgresConnection, app: String, _ b: PollBatch, runId: Int64?, asOf: Date,
                                  detectedAt: Date) throws -> (events: Int, obsoleted: Int, enqueued: Int) {
        try transactionsUpsert(db, b.transactions)
        let events = try churnEventsInsert(db, app: app, b.events, runId: runId, detectedAt: detectedAt)
        try segmentsUpsert(db, app: app, b.segments, detectedAt: detectedAt)
        try retentionRecord(db, b.retention, asOf: asOf)
        let obsoleted = try winbackObsolete(db, b.obsolete, runId: runId)
        let enqueued = try winbackInsert(db, app: app, b.winback, runId: runId, openedAt: asOf)
        try winbackAssignOffers(db, app: app, b.winback)
        return (events, obsoleted, enqueued)
    }
}

/// A batch of poll results as column arrays, one per `unnest` parameter of the commit's
/// statements.
struct PollBatch {
    /// Polled subscriptions (their current ids, after a learned id) and the environments that
    /// answered (as stored: `Production`, `Sandbox`).
    var polledIds: [String] = [], polledEnvironments: [String] = []
    /// The run items of the polled subscriptions (the ids they were planned under).
    var polledItemIds: [String] = []
    var failedIds: [String] = [], failedClasses: [ItemFailureClass] = [], failedReasons: [String] = []
    /// Placeholder ids of subscriptions registered with a receipt alone, and the ids learned for them.
    var renamedFrom: [String] = [], renamedTo: [String] = []
    var subscriptions = SubscriptionColumns()
    var transactions = TransactionColumns()
    var events = EventColumns()
    var segments = SegmentColumns()
    var retention = RetentionColumns()
    var winback = WinbackColumns()
    var obsolete = ObsoleteColumns()
    var quarantine = QuarantineColumns()
    /// Answers older than the stored state, to place by their `signedDate`.
    var late: [FeedBatch.Late] = []

    init(_ writes: [PollWrite]) throws {
        // Unsorted keys: every column it writes is jsonb, which keeps its own key order.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var fresh: [(PollWrite.Polled, ClaimedItem)] = []
        for w in writes {
            switch w.outcome {
            case .polled(let p):
                let item = w.subscriptionItem
                if item.originalTransactionId != w.item.originalTransactionId {
                    renamedFrom.append(w.item.originalTransactionId)
                    renamedTo.append(item.originalTransactionId)
                }
                polledIds.append(item.originalTransactionId)
                polledItemIds.append(w.item.originalTransactionId)
                polledEnvironments.append(p.environment.rawValue)
                if !p.stale { fresh.append((p, item)) }
                if p.stale, let o = p.late {
                    late.append(.init(originalTransactionId: item.originalTransactionId, observation: o, uuid: nil, inboxId: nil))
                }
            case .failed(let failureClass, let reason):
                failedIds.append(w.item.originalTransactionId)
                failedClasses.append(failureClass)
                failedReasons.append(reason)
            }
        }
        for (p, item) in fresh { try subscriptions.append(p, item, encoder) }
        for (p, item) in fresh {
            for tx in p.transactions { transactions.append(tx) }
            for event in p.events { events.append(item.originalTransactionId, event) }
            segments.append(p, item)
            for entry in p.winback.entries { winback.append(entry, item) }
            for gone in p.winback.obsolete { obsolete.append(item.originalTransactionId, gone) }
        }
        for w in writes {
            for qp in w.quarantine { quarantine.append(w.item.originalTransactionId, qp) }
        }
        for (p, item) in fresh { retention.append(p, item.originalTransactionId) }
    }
}
