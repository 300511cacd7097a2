import ChurnStore
import ChurnModel
import Foundation
import Logging
import Synchronization

/// The driver: carries out what ``RunMachine`` decides against ChurnStore and the poller. It
/// reads the time only from its ``RunClock`` and waits only for the next event (a poll, a
/// database step, a stop request) or the machine's next deadline.
extension RunEngine {
    /// The machine and what the driver keeps beside it.
    struct Shared: Sendable {
        var machine: RunMachine
        /// Wakes the supervisor when a stop is requested during work (once per stretch of work).
        var wake: AsyncStream<Void>.Continuation?
        /// The first unexpected error of a lane (a bug): the work stops and the error is thrown.
        var failure: (any Error)?
        /// Runs closed before the current one (earlier nights).
        var closedEarlier: [RunSummary] = []
        /// What this process's sync of the change feed did (nil: none).
        var feed: FeedSummary?
        /// What this process's pass over the open refund requests did (nil: none).
        var refunds: RefundAnswerSummary?
    }

    /// Changes the shared state; wakes the supervisor the first time a stop shows.
    @discardableResult
    func update<R: Sendable>(_ body: (inout Shared) -> R) -> R {
        let (result, wake) = state.withLock { shared -> (R, AsyncStream<Void>.Continuation?) in
            let result = body(&shared)
            guard shared.machine.stopReason != nil, let wake = shared.wake else { return (result, nil) }
            shared.wake = nil
            return (result, wake)
        }
        wake?.yield()
        return result
    }

    private enum Child: Sendable {
        case laneEnded
        case woken
        case tick(Date)
        case locksKept
    }

    /// Claims, polls and commits until nothing is left (nil) or a stop is requested (the stop).
    func work(run: RunRecord, locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunStop? {
        let (signal, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let now = clock.now()
        let lanes = update { shared in
            shared.wake = wake
            return shared.machine.beginWork(now: now)
        }
        try await persist("heartbeat") { try await self.store.runWorkerHeartbeat(runId: run.id, worker: self.options.workerName) }
        await withTaskGroup(of: Child.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    await self.lane(lane, run: run, progress: progress)
                    return .laneEnded
                }
            }
            group.addTask {
                for await _ in signal { return .woken }
                return .woken
            }
            await supervise(&group, locks: locks, lanes: lanes)
        }
        wake.finish()
        let (ended, stats, failure) = state.withLock { shared in
            shared.wake = nil
            return (shared.machine.endWork(), shared.machine.stats, shared.failure)
        }
        if ended.releaseAll {
            _ = try? await store.runItemsReleaseAll(runId: run.id, worker: options.workerName)
        }
        try? await store.runWorkerHeartbeat(runId: run.id, worker: options.workerName, stats: try StoredJSON(encoding: stats))
        if let failure { throw failure }
        return ended.stop
    }

    /// The supervisor: the shutdown grace, the time budget and the lock check, until every lane
    /// has returned.
    private func supervise(_ group: inout TaskGroup<Child>, locks: RunLocks, lanes: Int) async {
        var running = lanes
        var armed: Set<Date> = []
        while running > 0 {
            let now = clock.now()
            switch update({ $0.machine.supervise(now: now) }) {
            case .abandonInFlight:
                // In-flight work did not finish in time: abandon it (cancelled requests return
                // at once; their items go back to pending, nothing is committed).
                logger.warning("shutdown grace over: abandoning in-flight work", metadata: ["grace_s": "\(options.shutdownGrace)"])
                group.cancelAll()
            case .keepLocks:
                // After a PostgreSQL restart, the locks are taken again on a new connection.
                group.addTask {
                    await locks.keep()
                    return .locksKept
                }
            case .wait(let until):
                if let until, !armed.contains(where: { $0 <= until }) {
                    armed.insert(until)
                    group.addTask {
                        try? await self.clock.sleep(until: until)
                        return .tick(until)
                    }
                }
                switch await group.next() {
                case .laneEnded?: running -= 1
                case .tick(let time)?: armed.remove(time)
                case .locksKept?:
                    let now = clock.now()
                    update { $0.machine.locksKept(now: now) }
                case .woken?: break
                case nil: return
                }
            }
        }
        group.cancelAll()
    }

    /// One lane, with its failures: PostgreSQL gone past the retry budget ends the work; a
    /// cancellation is the grace period running out; anything else is a bug, thrown by `work`.
    private func lane(_ lane: Int, run: RunRecord, progress: (@Sendable (RunProgressReport) -> Void)?) async {
        do {
            try await laneLoop(lane, run: run, progress: progress)
        } catch let error where DatabaseConnectionProblem(error) != nil {
            let message = DatabaseConnectionProblem(error)?.message ?? "\(error)"
            let now = clock.now()
            update { $0.machine.stop(.database(message), now: now) }
        } catch is CancellationError {
            // The grace period ran out: the lane gave up its batch.
        } catch {
            let now = clock.now()
            update { shared in
                if shared.failure == nil { shared.failure = error }
                shared.machine.stop(.internalError("internal error"), now: now)
            }
        }
    }

    /// Carries out lane `lane`'s actions until the machine ends it.
    private func laneLoop(_ lane: Int, run: RunRecord, progress: (@Sendable (RunProgressReport) -> Void)?) async throws {
        let worker = options.workerName
        try await withThrowingTaskGroup(of: SubscriptionPoller.Result.self) { polls in
            var results: [String: SubscriptionPoller.Result] = [:]
            var event = RunMachine.LaneEvent.proceed
            while true {
                let (now, cancelled) = (clock.now(), Task.isCancelled)
                let action = update { $0.machine.lane(lane, event, cancelled: cancelled, now: now) }
                event = .proceed
                switch action {
                case .claim(let limit):
                    let items = try await persist("claim") {
                        try await self.store.runItemsClaim(runId: run.id, worker: worker, limit: limit, lease: self.options.lease)
                    }
                    for item in items { polls.addTask { await self.poller.poll(item, asOf: run.asOf) } }
                    event = .claimed(items.map(\.originalTransactionId))
                case .awaitPoll:
                    guard let result = try await polls.next() else { continue }
                    results[result.write.item.originalTransactionId] = result
                    event = .pollFinished(Self.finished(result))
                case .commit(let ids):
                    try await commit(ids.compactMap { results.removeValue(forKey: $0) }, lane: lane, run: run, progress: progress)
                case .checkProgress:
                    let finished = try await persist("progress") { try await self.store.runProgress(run.id) }.finished
                    event = .progressChecked(runFinished: finished)
                case .recoverOrphans(let keep):
                    // Items of processes that died come back at once, a claim of ours whose answer
                    // was lost with a connection after ten seconds, the rest when their lease expires.
                    _ = try await persist("recover") {
                        try await self.store.runItemsRecoverDead(runId: run.id)
                            + self.store.runItemsReleaseOrphans(runId: run.id, worker: worker, keep: keep, lease: self.options.lease, olderThan: 10)
                    }
                case .release(let ids):
                    polls.cancelAll()
                    try? await store.runItemsRelease(runId: run.id, worker: worker, ids: ids)
                case .wait(let until):
                    try? await clock.sleep(until: until)
                    event = .waited
                case .end:
                    polls.cancelAll()
                    return
                }
            }
        }
    }

    /// Commits a lane's finished polls in one transaction, tells the machine, writes the
    /// heartbeat when it is due and reports progress.
    private func commit(_ finished: [SubscriptionPoller.Result], lane: Int, run: RunRecord,
                        progress: (@Sendable (RunProgressReport) -> Void)?) async throws {
        let worker = options.workerName
        let started = clock.now()
        // Poll times are on the run's clock: its as-of time plus the time worked, so a
        // simulated night (--as-of) records the same times a real one would.
        let startedAt = state.withLock { $0.machine.stats.startedAt }
        let detectedAt = run.asOf.addingTimeInterval(started.timeIntervalSince(startedAt))
        let writes = finished.map(\.write)
        let counts = try await persist("commit") {
            try await self.store.pollResultsCommit(runId: run.id, asOf: run.asOf, detectedAt: detectedAt, writes)
        }
        let now = clock.now()
        logger.trace("committed", metadata: ["items": "\(finished.count)", "commit_ms": "\(Int(now.timeIntervalSince(started) * 1000))"])
        let written = RunMachine.Counts(polled: counts.polled, failed: counts.failed, events: counts.events, enqueued: counts.enqueued)
        let (done, stats) = update { shared in (shared.machine.committed(lane: lane, counts: written, now: now), shared.machine.stats) }
        // The heartbeat (liveness and counters for `status`) at most once a second.
        if done.heartbeat {
            let stats = try StoredJSON(encoding: stats)
            try await persist("heartbeat") { try await self.store.runWorkerHeartbeat(runId: run.id, worker: worker, stats: stats) }
        }
        progress?(done.report)
    }

    /// A poll's result as the rules see it.
    static func finished(_ result: SubscriptionPoller.Result) -> RunMachine.Finished {
        var reason: String?
        if case .failed(_, let text) = result.write.outcome { reason = text }
        var calls: [String: Int] = [:]
        for (endpoint, n) in result.calls { calls[endpoint.rawValue, default: 0] += n }
        return RunMachine.Finished(id: result.write.item.originalTransactionId, failure: result.failure, reason: reason, calls: calls)
    }
}
