import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Postgres

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
    public var params = PostgresJSON(text: "{}")
    /// nil: the nightly run. Otherwise a backfill (its own lock, the same queue and budget).
    public var backfill: BackfillRequest?
    /// While PostgreSQL is away mid-run (restart, dropped connections), claims, commits and
    /// heartbeats are tried again with capped exponential backoff for this long; then the run
    /// stops, resumable.
    public var databaseRetry = PostgresReconnectPolicy()

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
    private let store: ChurnStore
    private let poller: SubscriptionPoller
    private let options: RunOptions
    private let logger: Logger
    private let state: LockedState

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
    /// committed batch.
    public func run(progress: (@Sendable (RunProgressReport) -> Void)? = nil) async throws -> RunOutcome {
        let kind = options.kind
        // This process's locks live on a connection of their own for the whole run: its worker
        // lock (others see it is alive) and, for the owner, the run lock of its kind.
        let locks = RunLocks(store: store, logger: logger)
        defer { Task { await locks.close() } }
        _ = try await locks.take(ChurnStore.workerLockKey(options.workerName), name: "worker")
        if options.join { return try await joinRun(locks: locks, progress: progress) }
        guard try await locks.take(ChurnStore.runLockKey(kind), name: "\(kind.rawValue) run") else {
            return .anotherRunInProgress(runId: try await store.runFindUnfinished(kind: kind)?.id)
        }
        let run: RunRecord
        if let unfinished = try await store.runFindUnfinished(kind: kind) {
            if case .cohort(let cohort, let fullHistory)? = options.backfill {
                let stored = try? unfinished.params.decode(BackfillParams.self)
                guard let stored, stored.sameWork(as: BackfillParams(cohort: cohort, fullHistory: fullHistory)) else {
                    return .otherBackfillUnfinished(runId: unfinished.id, cohort: stored?.summary ?? "unknown")
                }
            }
            run = unfinished
            // Items held by processes that are gone come back at once (their worker locks died
            // with them); the heartbeat rule catches workers of older builds.
            let dead = try await store.runItemsRecoverDead(runId: run.id)
            let recovered = try await store.runItemsRecover(runId: run.id, silence: options.lease)
            try await store.runResume(run.id)
            logger.info("resuming run", metadata: ["run": "\(run.id)", "kind": "\(kind.rawValue)", "as_of": "\(run.asOf.ISO8601Format())",
                                                   "recovered_items": "\(dead + recovered)"])
        } else {
            switch options.backfill {
            case nil:
                let (created, byReason) = try await store.runCreateNightly(asOf: options.asOf, windows: options.windows, params: options.params)
                run = created
                logger.info("planned run", metadata: [
                    "run": "\(run.id)", "due": "\(run.due)",
                    "by_reason": "\(byReason.sorted { $0.key.priority < $1.key.priority }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " "))",
                ])
            case .resume?:
                return .nothingToResume
            case .cohort(let cohort, _)?:
                run = try await store.runCreateBackfill(asOf: options.asOf, cohort: cohort, params: options.params)
                logger.info("planned backfill", metadata: ["run": "\(run.id)", "due": "\(run.due)", "cohort": "\(cohort.summary)"])
            }
        }
        state.setRun(run.id, due: run.due)
        let ending = try await work(run: run, locks: locks, progress: progress)
        switch ending {
        case .drained:
            do {
                let summary = try await persist("finish") { try await self.store.runFinish(run.id, asOf: run.asOf) }
                return .finished(summary)
            } catch let error as PostgresError where error.isConnectionProblem {
                return .databaseUnavailable(runId: run.id, detail: error.message)
            }
        case .stopped(let reason):
            try? await persist("interrupt") { try await self.store.runInterrupt(run.id) }
            return .interrupted(runId: run.id, reason: reason)
        case .appleUnavailable(let detail):
            try? await persist("interrupt") { try await self.store.runInterrupt(run.id) }
            return .appleUnavailable(runId: run.id, detail: detail)
        case .unauthorized:
            try? await persist("interrupt") { try await self.store.runInterrupt(run.id) }
            return .unauthorized(runId: run.id)
        case .untrustedServer(let detail):
            try? await persist("interrupt") { try await self.store.runInterrupt(run.id) }
            return .untrustedServer(runId: run.id, detail: detail)
        case .databaseUnavailable(let detail):
            try? await store.runInterrupt(run.id)
            return .databaseUnavailable(runId: run.id, detail: detail)
        }
    }

    private func joinRun(locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        guard let run = try await store.runFindUnfinished(kind: options.kind) else { return .nothingToJoin }
        state.setRun(run.id, due: run.due)
        logger.info("joining run", metadata: ["run": "\(run.id)", "worker": "\(options.workerName)"])
        switch try await work(run: run, locks: locks, progress: progress) {
        case .drained: return .joinedAndDrained(runId: run.id, polled: state.stats.polled)
        case .stopped(let reason): return .interrupted(runId: run.id, reason: reason)
        case .appleUnavailable(let detail): return .appleUnavailable(runId: run.id, detail: detail)
        case .unauthorized: return .unauthorized(runId: run.id)
        case .untrustedServer(let detail): return .untrustedServer(runId: run.id, detail: detail)
        case .databaseUnavailable(let detail): return .databaseUnavailable(runId: run.id, detail: detail)
        }
    }

    /// Runs a database step of the run, again and again while PostgreSQL is away (within
    /// `options.databaseRetry`). Every step wrapped so is safe to repeat: claims, batch commits
    /// (idempotent), heartbeats, releases, the finish.
    private func persist<T: Sendable>(_ what: String, _ operation: @Sendable () async throws -> T) async throws -> T {
        let logger = self.logger
        return try await store.pool.withReconnect(policy: options.databaseRetry, onRetry: { error, delay in
            logger.warning("PostgreSQL unavailable: retrying", metadata: [
                "operation": "\(what)", "retry_in_s": "\((delay * 10).rounded() / 10)", "error": "\(error.message)",
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
    private func work(run: RunRecord, locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> Ending {
        let started = Date()
        let deadline = options.maxDuration.map { started.addingTimeInterval($0) }
        if let deadline { state.setDeadline(deadline) }
        try await persist("heartbeat") { try await self.store.runWorkerHeartbeat(runId: run.id, worker: self.options.workerName) }
        let workers = max(1, (options.concurrency + options.batchSize - 1) / options.batchSize)
        let perBatch = min(options.batchSize, max(1, options.concurrency))
        await withTaskGroup(of: Child.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    do {
                        try await self.workerLoop(run: run, batch: perBatch, progress: progress)
                    } catch let error as PostgresError where error.isConnectionProblem {
                        self.state.end(.databaseUnavailable(error.message), reason: "PostgreSQL unavailable: \(error.message)")
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
        try? await store.runWorkerHeartbeat(runId: run.id, worker: options.workerName, stats: try PostgresJSON(encoding: state.stats))
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
                    let stats = try PostgresJSON(encoding: state.stats)
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

/// The advisory locks one process holds while it works a run, on a connection of their own:
/// its worker lock (always) and the run lock of its kind (the owner). After that connection
/// was lost (a PostgreSQL restart, a terminated backend), `keep()` takes them again on a new one.
final class RunLocks: @unchecked Sendable {
    private let pool: PostgresPool
    private let logger: Logger
    private let lock = NSLock()
    private var held: [Int64: String] = [:]
    private var backend: Int32 = 0

    init(store: ChurnStore, logger: Logger) {
        pool = PostgresPool(connectionString: store.pool.connectionString, overrides: store.pool.overrides, size: 1, logger: logger)
        self.logger = logger
    }

    /// Takes `key` without waiting; true when granted (and kept from then on).
    func take(_ key: Int64, name: String) async throws -> Bool {
        let (got, pid) = try await pool.withConnection { c in (try c.tryAdvisoryLock(key), c.backendPID) }
        lock.withLock {
            if got { held[key] = name }
            backend = pid
        }
        return got
    }

    /// Checks the lock connection; on a new connection, takes every lock again.
    func keep() async {
        let (wanted, known) = lock.withLock { (held, backend) }
        do {
            let (pid, lost) = try await pool.withConnection { c -> (Int32, [Int64]) in
                try c.ping()
                guard c.backendPID != known else { return (c.backendPID, []) }
                var lost: [Int64] = []
                for key in wanted.keys where try !c.tryAdvisoryLock(key) { lost.append(key) }
                return (c.backendPID, lost)
            }
            guard pid != known else { return }
            lock.withLock {
                backend = pid
                for key in lost { held[key] = nil }
            }
            if lost.isEmpty {
                logger.notice("reconnected: took this process's locks again")
            } else {
                // Another process took the run while we were cut off. It works the same queue;
                // this one goes on as a helper (closing a run twice is harmless).
                logger.warning("reconnected, but another process holds the lock now: going on as a helper",
                               metadata: ["locks": "\(lost.compactMap { wanted[$0] }.joined(separator: ", "))"])
            }
        } catch {
            logger.debug("lock connection unavailable; trying again", metadata: ["error": "\(error)"])
        }
    }

    func close() async { await pool.close() }
}

/// What a progress display needs after each batch.
public struct RunProgressReport: Sendable {
    public var runId: Int64
    public var due: Int
    public var polled: Int
    public var failed: Int
    public var calls: [String: Int]
    public var elapsed: TimeInterval
}

/// The engine's mutable state, behind a lock (touched from many tasks).
final class LockedState: @unchecked Sendable {
    private let lock = NSLock()
    private var _stats = WorkerStats()
    private var stopReason: String?
    private var deadline: Date?
    private var _graceOver = false
    private var ending: RunEngine.Ending?
    private var consecutiveOutage = 0
    private var runId: Int64 = 0
    private var due = 0
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []
    private var done = false
    private let outageThreshold: Int
    private var _failure: (any Error)?
    private var _inFlight: Set<String> = []
    private var lastOrphanCheck = Date.distantPast
    private var lastHeartbeat = Date.distantPast

    init(outageThreshold: Int) { self.outageThreshold = outageThreshold }

    var stats: WorkerStats { lock.withLock { _stats } }
    var graceOver: Bool { lock.withLock { _graceOver } }
    var abnormalEnding: RunEngine.Ending? { lock.withLock { ending } }
    var isDone: Bool { lock.withLock { done } }
    /// The first unexpected error of a worker (a bug): the run stops and the error is thrown.
    var failure: (any Error)? { lock.withLock { _failure } }
    /// Items this process is polling right now.
    var inFlight: [String] { lock.withLock { Array(_inFlight) } }

    func beginFlight(_ ids: [String]) { lock.withLock { _inFlight.formUnion(ids) } }
    func endFlight(_ ids: [String]) { lock.withLock { _inFlight.subtract(ids) } }

    /// True at most once a second per process: time to write the heartbeat.
    func heartbeatDue() -> Bool {
        lock.withLock {
            guard Date().timeIntervalSince(lastHeartbeat) >= 1 else { return false }
            lastHeartbeat = Date()
            return true
        }
    }

    /// True at most every two seconds per process: time to look for items of dead workers.
    func orphanCheckDue() -> Bool {
        lock.withLock {
            guard Date().timeIntervalSince(lastOrphanCheck) >= 2 else { return false }
            lastOrphanCheck = Date()
            return true
        }
    }

    /// Ends the run this way (unless it already ends another way) and stops claiming.
    func end(_ why: RunEngine.Ending, reason: String) {
        lock.withLock { if ending == nil { ending = why } }
        requestStop(reason)
    }

    func fail(_ error: any Error) {
        lock.withLock { if _failure == nil { _failure = error } }
        requestStop("internal error")
    }

    func setRun(_ id: Int64, due: Int) { lock.withLock { runId = id; self.due = due } }
    func setDeadline(_ d: Date) { lock.withLock { deadline = d } }

    func requestStop(_ reason: String) {
        let waiters: [CheckedContinuation<Void, Never>] = lock.withLock {
            if stopReason == nil { stopReason = reason }
            if ending == nil { ending = .stopped(reason) }
            let w = stopWaiters
            stopWaiters = []
            return w
        }
        waiters.forEach { $0.resume() }
    }

    /// Every worker has returned: release the grace watchdog.
    func workersDone() {
        let waiters: [CheckedContinuation<Void, Never>] = lock.withLock {
            done = true
            let w = stopWaiters
            stopWaiters = []
            return w
        }
        waiters.forEach { $0.resume() }
    }

    /// Returns once a stop is requested or the workers are done.
    func waitForStop() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if stopReason != nil || done { return true }
                stopWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    func markGraceOver() { lock.withLock { _graceOver = true } }

    func shouldStopClaiming() -> Bool {
        var expired = false
        let stop: Bool = lock.withLock {
            if stopReason != nil { return true }
            if let deadline, Date() >= deadline { expired = true }
            return false
        }
        if expired { requestStop("time budget (--max-duration) used up") }
        return stop || expired
    }

    /// Adds a batch's results; ends the run on an Apple outage or a rejected key.
    func record(_ results: [SubscriptionPoller.Result], _ counts: BatchCounts) -> RunProgressReport {
        var stopFor: String?
        let report: RunProgressReport = lock.withLock {
            _stats.polled += counts.polled
            _stats.failed += counts.failed
            _stats.events += counts.events
            _stats.enqueued += counts.enqueued
            for r in results {
                for (endpoint, n) in r.calls { _stats.calls[endpoint.rawValue, default: 0] += n }
                switch r.failure {
                case nil, .subscription?:
                    consecutiveOutage = 0
                case .appleUnavailable?:
                    consecutiveOutage += 1
                case .unauthorized?:
                    if ending == nil { ending = .unauthorized }
                    stopFor = "Apple rejected the API key"
                case .untrustedServer?:
                    var detail = "untrusted server"
                    if case .failed(let reason) = r.write.outcome { detail = reason }
                    if ending == nil { ending = .untrustedServer(detail) }
                    stopFor = detail
                }
            }
            if consecutiveOutage >= outageThreshold, ending == nil {
                let last = results.last { $0.failure == .appleUnavailable }
                var detail = "Apple unavailable"
                if case .failed(let reason)? = last?.write.outcome { detail = reason }
                ending = .appleUnavailable(detail)
                stopFor = detail
            }
            return RunProgressReport(runId: runId, due: due, polled: _stats.polled, failed: _stats.failed, calls: _stats.calls,
                                     elapsed: Date().timeIntervalSince(_stats.startedAt))
        }
        if let stopFor { requestStop(stopFor) }
        return report
    }
}
