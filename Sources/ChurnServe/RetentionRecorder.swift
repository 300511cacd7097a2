import ChurnStore
import Foundation
import Synchronization

/// Writes the cancel page's answered requests after their answers (``GroupCommit/enqueue(_:)``):
/// several to one statement, and those the database could not take (down or slow) kept to be
/// written when it returns. An answer never waits for its record, and a record is not dropped
/// unless `maxQueued` wait already (then the newest is, and counted).
final class RetentionRecorder: Sendable {
    private struct Item {
        var store: ChurnStore
        var record: RetentionRequestRecord
    }

    private let writer: GroupCommit<Item, Void>
    private let metrics: RetentionMetrics

    init(metrics: RetentionMetrics, maxQueued: Int = 20_000, retryEvery: Duration = .seconds(1)) {
        self.metrics = metrics
        // One lane: a batch that failed is tried again before what came after it.
        writer = GroupCommit(lanes: 1, maxQueued: maxQueued, retryEvery: retryEvery, noun: "cancel-page records") { items in
            // Each app's records in its own statement; a failed batch is written again whole
            // (the statement skips those stored).
            for group in Dictionary(grouping: items, by: { $0.store.app }).values {
                try await group[0].store.retentionRecord(group.map(\.record))
            }
            return items.map { _ in () }
        } afterBatch: { failed, pending in
            metrics.recorder(failed: failed, pending: pending)
        }
    }

    /// Queues one record, to be committed with those around it; returns at once.
    func submit(_ record: RetentionRequestRecord, in store: ChurnStore) {
        if !writer.enqueue(Item(store: store, record: record)) { metrics.recordDropped() }
    }

    /// Returns once nothing is queued (at the stop; the caller bounds the wait).
    func idle() async {
        await writer.idle()
    }
}

/// Whether the database is worth asking now: after a failure, one request a second tries it (the
/// others answer from what serve holds, at once), until one succeeds.
final class DatabaseBreaker: Sendable {
    private struct State {
        var failedAt: ContinuousClock.Instant?
        var probing = false
    }
    private let state = Mutex(State())
    private let probeEvery: Duration

    init(probeEvery: Duration = .seconds(1)) { self.probeEvery = probeEvery }

    func shouldTry() -> Bool {
        state.withLock { s in
            guard let failed = s.failedAt else { return true }
            guard !s.probing, ContinuousClock.now - failed >= probeEvery else { return false }
            s.probing = true
            return true
        }
    }

    func succeeded() { state.withLock { $0 = State() } }
    func failed() { state.withLock { $0 = State(failedAt: .now, probing: false) } }
    /// A call that did not answer in time: opens nothing, but a probe's slowness counts as a failure.
    func slow() { state.withLock { if $0.failedAt != nil { $0 = State(failedAt: .now, probing: false) } } }
}
