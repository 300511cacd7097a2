import ChurnStore
import Foundation
import Synchronization

/// Writes the cancel page's answered requests after their answers, several to one statement
/// (group commit), and keeps those the database could not take (down or slow) to write them
/// when it returns: an answer never waits for its record, and a record is not dropped unless
/// `maxQueued` wait already (then the newest is, and counted).
final class RetentionRecorder: Sendable {
    private struct Item {
        var store: ChurnStore
        var record: RetentionRequestRecord
    }

    private struct State {
        var queued: [Item] = []
        var writing = false
        /// Those waiting for every queued record to be written (shutdown).
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let metrics: RetentionMetrics
    private let maxQueued: Int
    private let retryEvery: Duration

    init(metrics: RetentionMetrics, maxQueued: Int = 20_000, retryEvery: Duration = .seconds(1)) {
        (self.metrics, self.maxQueued, self.retryEvery) = (metrics, maxQueued, retryEvery)
    }

    /// Queues one record, to be committed with those around it; returns at once.
    func submit(_ record: RetentionRequestRecord, in store: ChurnStore) {
        let item = Item(store: store, record: record)
        // Only the writer takes from the front; past the bound the newest is dropped.
        let (start, full) = state.withLock { s -> (Bool, Bool) in
            guard s.queued.count < maxQueued else { return (false, true) }
            s.queued.append(item)
            defer { s.writing = true }
            return (!s.writing, false)
        }
        if full { metrics.recordDropped() }
        if start { Task { await self.write() } }
    }

    /// Returns once nothing is queued (at shutdown; the caller bounds the wait).
    func idle() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.writing || !s.queued.isEmpty else { return true }
                s.idleWaiters.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }

    /// Writes what is queued until nothing is; a failed batch stays queued and is tried again.
    private func write() async {
        while true {
            let (batch, idle) = state.withLock { s -> ([Item], [CheckedContinuation<Void, Never>]) in
                let batch = Array(s.queued.prefix(500))
                guard batch.isEmpty else { return (batch, []) }
                s.writing = false
                defer { s.idleWaiters = [] }
                return (batch, s.idleWaiters)
            }
            guard !batch.isEmpty else {
                for waiter in idle { waiter.resume() }
                return
            }
            var failed = false
            for group in Dictionary(grouping: batch, by: { $0.store.app }).values {
                do {
                    try await group[0].store.retentionRecord(group.map(\.record))
                } catch {
                    failed = true
                    break
                }
            }
            let pending = state.withLock { s -> Int in
                if !failed { s.queued.removeFirst(batch.count) }
                return s.queued.count
            }
            metrics.recorder(failed: failed, pending: pending)
            if failed {
                // Every record of the batch is written again (the statement skips those stored).
                try? await Task.sleep(for: retryEvery)
            }
        }
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
