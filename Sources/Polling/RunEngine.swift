import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging

/// How a run is carried out.
public struct RunOptions: Sendable {
    public var asOf: Date
    public var windows = PlanWindows()
    /// Apple requests in flight at once (per process).
    public var concurrency = 32
    /// Items claimed and committed together.
    public var batchSize = 32
    /// How long a claim holds before another worker may take the item.
    public var lease: TimeInterval = 120
    /// Work an unfinished run instead of owning one (`run --join`): no lock, no planning, no
    /// closing; exits when no work is left.
    public var join = false
    public var workerName = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier):\(UInt16.random(in: 0...UInt16.max))"
    /// Stop claiming after this long (a night has an end): exit resumable.
    public var maxDuration: TimeInterval?
    /// After a stop request, in-flight batches get this long to finish before they are abandoned
    /// (their items go back to pending).
    public var shutdownGrace: TimeInterval = 30
    public var policy = WinbackPolicy.default
    public var fullHistory = false
    /// Consecutive "Apple unavailable" failures (with no success between) that end the run as resumable.
    public var outageThreshold = 40
    /// Stored in the run row, for the record.
    public var params = StoredJSON.emptyObject
    /// nil: the nightly run. Otherwise a backfill (its own lock, the same queue and budget).
    public var backfill: BackfillRequest?
    /// While PostgreSQL is away mid-run (restart, dropped connections), claims, commits and
    /// heartbeats are tried again with capped exponential backoff for this long; then the run
    /// stops, resumable.
    public var databaseRetry = DatabaseRetryPolicy()

    public var kind: RunRecord.Kind { backfill == nil ? .nightly : .backfill }

    public init(asOf: Date) { self.asOf = asOf }
}

/// What a backfill process is asked to do.
public enum BackfillRequest: Sendable, Equatable {
    /// Poll this cohort; an unfinished backfill of the same cohort is resumed instead.
    case cohort(BackfillCohort, fullHistory: Bool)
    /// Resume the unfinished backfill, whatever its cohort.
    case resume
}

/// How a run ended.
public enum RunOutcome: Sendable {
    /// Every item is done or failed; the run is closed.
    case finished(RunSummary)
    /// Joined a run and worked until nothing was left (the owner closes it).
    case joinedAndDrained(runId: Int64, polled: Int)
    /// Another process owns the run of this kind (the nightly run, or the backfill).
    case anotherRunInProgress(runId: Int64?)
    /// Nothing to join.
    case nothingToJoin
    /// `backfill --resume` with no unfinished backfill.
    case nothingToResume
    /// A backfill of another cohort is unfinished: one backfill at a time.
    case otherBackfillUnfinished(runId: Int64, cohort: String)
    /// Stopped early (signal or time budget); the next `run` resumes it.
    case interrupted(runId: Int64, reason: String)
    /// Apple did not answer for longer than the retry budget; the next `run` resumes.
    case appleUnavailable(runId: Int64, detail: String)
    /// Apple rejected the API key.
    case unauthorized(runId: Int64)
    /// The server's TLS certificate was not trusted (`detail` says whose and why).
    case untrustedServer(runId: Int64, detail: String)
    /// PostgreSQL stayed away longer than the retry budget mid-run; the next `run` resumes.
    case databaseUnavailable(runId: Int64, detail: String)
}

/// Counters one process keeps while it works a run (also written to its heartbeat).
public struct WorkerStats: Sendable, Codable, Equatable {
    public var polled = 0
    public var failed = 0
    public var events = 0
    public var enqueued = 0
    public var calls: [String: Int] = [:]
    public var startedAt = Date()
}

/// One process working one run: plans it (when it owns it), claims batches, polls Apple
/// concurrently within a shared budget, commits each batch in one transaction, and closes the
/// run when nothing is left. Stops cleanly on request.
public final class RunEngine: Sendable {
    let store: ChurnStore
    private let poller: SubscriptionPoller
    let options: RunOptions
    let logger: Logger
    let state: LockedState
    let retryRule = RateLimitedRetryRule()

    public init(store: ChurnStore, poller: SubscriptionPoller, options: RunOptions, logger: Logger) {
        self.store = store
        self.poller = poller
        self.options = options
        self.logger = logger
        self.state = LockedState(outageThreshold: options.outageThreshold)
    }

    /// Asks the run to stop: no new claims; in-flight batches finish within the grace period.
    public func requestStop(_ reason: String) {
        state.requestStop(reason)
    }

    /// The counters so far.
    public var stats: WorkerStats { state.stats }

    /// Runs (or resumes, or joins) and returns how it ended. `progress` is called after every
    /// committed batch. The nightly owner may work several runs: unfinished ones of earlier
    /// nights first, then tonight's (``NightlyQueue``); the outcome is the last one's, and the
    /// runs closed before it are in ``closedEarlier``.
    public func run(progress: (@Sendable (RunProgressReport) -> Void)? = nil) async throws -> RunOutcome {
        let kind = options.kind
        // This process's locks live on a connection of their own for the whole run: its worker
        // lock (others see it is alive) and, for the owner, the run lock of its kind.
        let locks = store.runLocksOpen(logger: logger)
        defer { Task { await locks.close() } }
        _ = try await locks.take(ChurnStore.workerLockKey(options.workerName), name: "worker")
        if options.join { return try await joinRuns(locks: locks, progress: progress) }
        guard try await locks.take(ChurnStore.runLockKey(kind), name: "\(kind.rawValue) run") else {
            return .anotherRunInProgress(runId: try await store.runFindUnfinished(kind: kind)?.id)
        }
        guard let backfill = options.backfill else { return try await runNights(locks: locks, progress: progress) }
        let run: RunRecord
        if let unfinished = try await store.runFindUnfinished(kind: kind) {
            if case .cohort(let cohort, let fullHistory) = backfill {
                let stored = try? unfinished.params.decode(BackfillParams.self)
                guard let stored, stored.sameWork(as: BackfillParams(cohort: cohort, fullHistory: fullHistory)) else {
                    return .otherBackfillUnfinished(runId: unfinished.id, cohort: stored?.summary ?? "unknown")
                }
            }
            run = unfinished
            try await resume(run)
        } else {
            switch backfill {
            case .resume:
                return .nothingToResume
            case .cohort(let cohort, _):
                run = try await store.runCreateBackfill(asOf: options.asOf, cohort: cohort, params: options.params)
                logger.info("planned backfill", metadata: ["run": "\(run.id)", "due": "\(run.due)", "cohort": "\(cohort.summary)"])
            }
        }
        return try await workAndClose(run, locks: locks, progress: progress)
    }

    /// The runs this process closed before the one its outcome is about (earlier nights).
    public var closedEarlier: [RunSummary] { state.closedEarlier }

    /// Takes an unfinished run over: items held by processes that are gone come back at once
    /// (their worker locks died with them; the heartbeat rule catches workers of older builds),
    /// and items that failed for a reason of the whole run are tried again.
    func resume(_ run: RunRecord, recovered known: Int? = nil) async throws {
        var recovered = known ?? 0
        if known == nil { recovered = try await recoverItems(run) }
        try await store.runResume(run.id)
        logger.info("resuming run", metadata: ["run": "\(run.id)", "kind": "\(run.kind.rawValue)", "as_of": "\(run.asOf.ISO8601Format())",
                                               "recovered_items": "\(recovered)"])
    }

    /// The item side of ``resume(_:recovered:)``: returns how many items came back to pending.
    func recoverItems(_ run: RunRecord) async throws -> Int {
        let dead = try await store.runItemsRecoverDead(runId: run.id)
        return dead + (try await store.runItemsRecover(runId: run.id, silence: options.lease))
    }

    /// Runs a database step of the run, again and again while PostgreSQL is away (within
    /// `options.databaseRetry`). Every step wrapped so is safe to repeat: claims, batch commits
    /// (idempotent), heartbeats, releases, the finish.
    func persist<T: Sendable>(_ what: String, _ operation: @Sendable () async throws -> T) async throws -> T {
        let logger = self.logger
        return try await store.withReconnect(policy: options.databaseRetry, onRetry: { error, delay in
            logger.warning("PostgreSQL unavailable: retrying", metadata: [
                "operation": "\(what)", "retry_in_s": "\((delay * 10).rounded() / 10)", "error": "\(error)",
            ])
        }, operation)
    }

    enum Ending: Sendable {
        case drained
        case stopped(String)
        case appleUnavailable(String)
        case unauthorized
        case untrustedServer(String)
        case databaseUnavailable(String)
    }

    private enum Child: Sendable {
        case worker
        case graceOver
        case other
    }

    /// Claims, polls and commits until nothing is left or a stop is requested.
    func work(run: RunRecord, locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> Ending {
        // The time budget is the invocation's, over every run it works.
        let deadline = options.maxDuration.map { state.stats.startedAt.addingTimeInterval($0) }
        if let deadline { state.setDeadline(deadline) }
        state.beginWork()
        try await persist("heartbeat") { try await self.store.runWorkerHeartbeat(runId: run.id, worker: self.options.workerName) }
        let workers = max(1, (options.concurrency + options.batchSize - 1) / options.batchSize)
        let perBatch = min(options.batchSize, max(1, options.concurrency))
        await withTaskGroup(of: Child.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    do {
                        try await self.workerLoop(run: run, batch: perBatch, progress: progress)
                    } catch let error where DatabaseConnectionProblem(error) != nil {
                        let message = DatabaseConnectionProblem(error)?.message ?? "\(error)"
                        self.state.end(.databaseUnavailable(message), reason: "PostgreSQL unavailable: \(message)")
                    } catch is CancellationError {
                        // The grace period ran out: the worker gave up its batch.
                    } catch {
                        self.state.fail(error)
                    }
                    return .worker
                }
            }
            // The grace watchdog: once a stop is requested, in-flight work has `shutdownGrace`.
            group.addTask {
                await self.state.waitForStop()
                if self.state.isDone { return .other }
                try? await Task.sleep(nanoseconds: UInt64(max(0, self.options.shutdownGrace) * 1_000_000_000))
                return Task.isCancelled ? .other : .graceOver
            }
            // The time budget: a stop like a signal, even while every worker waits on Apple.
            if let deadline {
                group.addTask {
                    try? await Task.sleep(nanoseconds: UInt64(max(0, deadline.timeIntervalSinceNow) * 1_000_000_000))
                    if !Task.isCancelled { self.state.requestStop("time budget (--max-duration) used up") }
                    return .other
                }
            }
            // The locks: after a PostgreSQL restart, taken again on a new connection.
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    if !Task.isCancelled { await locks.keep() }
                }
                return .other
            }
            var running = workers
            while running > 0, let child = await group.next() {
                switch child {
                case .worker:
                    running -= 1
                case .graceOver:
                    // In-flight work did not finish in time: abandon it (cancelled requests
                    // return at once; their items go back to pending, nothing is committed).
                    logger.warning("shutdown grace over: abandoning in-flight work", metadata: ["grace_s": "\(options.shutdownGrace)"])
                    state.markGraceOver()
                    group.cancelAll()
                case .other:
                    break
                }
            }
            state.workersDone()
            group.cancelAll()
        }
        if state.graceOver {
            _ = try? await store.runItemsReleaseAll(runId: run.id, worker: options.workerName)
        }
        try? await store.runWorkerHeartbeat(runId: run.id, worker: options.workerName, stats: try StoredJSON(encoding: state.stats))
        if let failure = state.failure { throw failure }
        if let ending = state.abnormalEnding { return ending }
        return .drained
    }

    /// One worker: keeps up to `batch` polls in flight, claims more as they finish, and
    /// commits finished ones together. There is no barrier per batch, so one slow answer (a
    /// Sandbox budget of 5/s, a retry) holds up only its own slot.
    private func workerLoop(run: RunRecord, batch: Int, progress: (@Sendable (RunProgressReport) -> Void)?) async throws {
        let worker = options.workerName
        try await withThrowingTaskGroup(of: SubscriptionPoller.Result.self) { group in
            var inFlight: Set<String> = []
            var finished: [SubscriptionPoller.Result] = []
            var lastCommit = Date()
            var othersHoldTheRest = false

            func commit() async throws {
                guard !finished.isEmpty else { return }
                // Poll times are on the run's clock: its as-of time plus the time worked, so a
                // simulated night (--as-of) records the same times a real one would.
                let detectedAt = run.asOf.addingTimeInterval(Date().timeIntervalSince(state.stats.startedAt))
                let started = Date()
                let writes = finished.map(\.write)
                let counts = try await persist("commit") {
                    try await self.store.pollResultsCommit(runId: run.id, worker: worker, asOf: run.asOf, detectedAt: detectedAt, writes)
                }
                logger.trace("committed", metadata: ["items": "\(finished.count)", "commit_ms": "\(Int(Date().timeIntervalSince(started) * 1000))"])
                let report = state.record(finished, counts)
                state.endFlight(writes.map(\.item.originalTransactionId))
                finished.removeAll(keepingCapacity: true)
                lastCommit = Date()
                // The heartbeat (liveness and counters for `status`) at most once a second.
                if state.heartbeatDue() {
                    let stats = try StoredJSON(encoding: state.stats)
                    try await persist("heartbeat") { try await self.store.runWorkerHeartbeat(runId: run.id, worker: worker, stats: stats) }
                }
                progress?(report)
            }

            while true {
                if Task.isCancelled || state.graceOver {
                    // Out of time: what finished is committed, what did not goes back to pending.
                    group.cancelAll()
                    try await commit()
                    try? await store.runItemsRelease(runId: run.id, worker: worker, ids: Array(inFlight))
                    state.endFlight(Array(inFlight))
                    return
                }
                if inFlight.count <= batch / 2, !state.shouldStopClaiming() {
                    let want = batch - inFlight.count
                    let items = try await persist("claim") {
                        try await self.store.runItemsClaim(runId: run.id, worker: worker, limit: want, lease: self.options.lease)
                    }
                    state.beginFlight(items.map(\.originalTransactionId))
                    for item in items {
                        inFlight.insert(item.originalTransactionId)
                        group.addTask { await self.poller.poll(item, asOf: run.asOf) }
                    }
                    othersHoldTheRest = false
                    if items.isEmpty && inFlight.isEmpty {
                        try await commit()
                        if try await persist("progress", { try await self.store.runProgress(run.id) }).finished { return }
                        // Others hold the rest. Items of processes that died come back at once, a
                        // claim of ours whose answer was lost with a connection after ten seconds,
                        // the rest when their lease expires.
                        if state.orphanCheckDue() {
                            let keep = state.inFlight
                            _ = try await persist("recover") {
                                try await self.store.runItemsRecoverDead(runId: run.id)
                                    + self.store.runItemsReleaseOrphans(runId: run.id, worker: worker, keep: keep, lease: self.options.lease, olderThan: 10)
                            }
                        }
                        othersHoldTheRest = true
                    }
                }
                if inFlight.isEmpty {
                    try await commit()
                    if state.shouldStopClaiming() { return }
                    if othersHoldTheRest { try await Task.sleep(nanoseconds: 500_000_000) }
                    continue
                }
                guard let result = try await group.next() else { continue }
                if Task.isCancelled || state.graceOver {
                    continue // its poll may have been cut short: the item is released above
                }
                inFlight.remove(result.write.item.originalTransactionId)
                finished.append(result)
                if finished.count >= batch || inFlight.isEmpty || Date().timeIntervalSince(lastCommit) > 0.25 {
                    try await commit()
                }
            }
        }
    }
}
