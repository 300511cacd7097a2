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
    public var batchSize = 16
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

    public init(asOf: Date) { self.asOf = asOf }
}

/// How a run ended.
public enum RunOutcome: Sendable {
    /// Every item is done or failed; the run is closed.
    case finished(RunSummary)
    /// Joined a run and worked until nothing was left (the owner closes it).
    case joinedAndDrained(runId: Int64, polled: Int)
    /// Another process owns the nightly run.
    case anotherRunInProgress(runId: Int64?)
    /// Nothing to join.
    case nothingToJoin
    /// Stopped early (signal or time budget); the next `run` resumes it.
    case interrupted(runId: Int64, reason: String)
    /// Apple did not answer for longer than the retry budget; the next `run` resumes.
    case appleUnavailable(runId: Int64, detail: String)
    /// Apple rejected the API key.
    case unauthorized(runId: Int64)
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

    static let lockKey = PostgresAdvisoryLockKey.named("churnwatch.run.nightly")

    /// Asks the run to stop: no new claims; in-flight batches finish within the grace period.
    public func requestStop(_ reason: String) {
        state.requestStop(reason)
    }

    /// The counters so far.
    public var stats: WorkerStats { state.stats }

    /// Runs (or resumes, or joins) and returns how it ended. `progress` is called after every
    /// committed batch.
    public func run(progress: (@Sendable (RunProgressReport) -> Void)? = nil) async throws -> RunOutcome {
        if options.join { return try await joinRun(progress: progress) }
        // The lock lives on its own connection for the whole run.
        let lockPool = PostgresPool(connectionString: store.pool.connectionString, overrides: store.pool.overrides, size: 1, logger: logger)
        defer { Task { await lockPool.close() } }
        let got = try await lockPool.withConnection { try $0.tryAdvisoryLock(Self.lockKey) }
        guard got else {
            return .anotherRunInProgress(runId: try await store.runFindActive()?.id)
        }
        let run: RunRecord
        if let unfinished = try await store.runFindUnfinished(kind: .nightly) {
            run = unfinished
            let recovered = try await store.runItemsRecover(runId: run.id, silence: options.lease)
            try await store.runResume(run.id)
            logger.info("resuming run", metadata: ["run": "\(run.id)", "as_of": "\(run.asOf.ISO8601Format())", "recovered_items": "\(recovered)"])
        } else {
            let (created, byReason) = try await store.runCreateNightly(asOf: options.asOf, windows: options.windows, params: options.params)
            run = created
            logger.info("planned run", metadata: [
                "run": "\(run.id)", "due": "\(run.due)",
                "by_reason": "\(byReason.sorted { $0.key.priority < $1.key.priority }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " "))",
            ])
        }
        state.setRun(run.id, due: run.due)
        let ending = try await work(run: run, progress: progress)
        switch ending {
        case .drained:
            let summary = try await store.runFinish(run.id, asOf: run.asOf)
            return .finished(summary)
        case .stopped(let reason):
            try await store.runInterrupt(run.id)
            return .interrupted(runId: run.id, reason: reason)
        case .appleUnavailable(let detail):
            try await store.runInterrupt(run.id)
            return .appleUnavailable(runId: run.id, detail: detail)
        case .unauthorized:
            try await store.runInterrupt(run.id)
            return .unauthorized(runId: run.id)
        }
    }

    private func joinRun(progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        guard let run = try await store.runFindActive() else { return .nothingToJoin }
        state.setRun(run.id, due: run.due)
        logger.info("joining run", metadata: ["run": "\(run.id)", "worker": "\(options.workerName)"])
        switch try await work(run: run, progress: progress) {
        case .drained: return .joinedAndDrained(runId: run.id, polled: state.stats.polled)
        case .stopped(let reason): return .interrupted(runId: run.id, reason: reason)
        case .appleUnavailable(let detail): return .appleUnavailable(runId: run.id, detail: detail)
        case .unauthorized: return .unauthorized(runId: run.id)
        }
    }

    enum Ending: Sendable {
        case drained
        case stopped(String)
        case appleUnavailable(String)
        case unauthorized
    }

    /// Claims, polls and commits until nothing is left or a stop is requested.
    private func work(run: RunRecord, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> Ending {
        let started = Date()
        if let max = options.maxDuration {
            state.setDeadline(started.addingTimeInterval(max))
        }
        try await store.runWorkerHeartbeat(runId: run.id, worker: options.workerName)
        let workers = max(1, (options.concurrency + options.batchSize - 1) / options.batchSize)
        let perBatch = min(options.batchSize, max(1, options.concurrency))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                group.addTask { try await self.workerLoop(run: run, batch: perBatch, progress: progress) }
            }
            // The grace watchdog: once a stop is requested, in-flight work has `shutdownGrace`.
            group.addTask {
                await self.state.waitForStop()
                try? await Task.sleep(nanoseconds: UInt64(self.options.shutdownGrace * 1_000_000_000))
                self.state.markGraceOver()
            }
            var finishedWorkers = 0
            while finishedWorkers < workers, let _ = try await group.next() {
                if state.graceOver && !state.workersAreDone {
                    // The watchdog returned: in-flight work had its grace period.
                    group.cancelAll()
                }
                finishedWorkers += 1
            }
            state.workersDone()
            group.cancelAll()
        }
        try? await store.runWorkerHeartbeat(runId: run.id, worker: options.workerName, stats: try PostgresJSON(encoding: state.stats))
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
                let counts = try await store.pollResultsCommit(runId: run.id, worker: worker, asOf: run.asOf,
                                                             detectedAt: detectedAt, finished.map(\.write))
                logger.trace("committed", metadata: ["items": "\(finished.count)", "commit_ms": "\(Int(Date().timeIntervalSince(started) * 1000))"])
                let report = state.record(finished, counts)
                finished.removeAll(keepingCapacity: true)
                lastCommit = Date()
                try await store.runWorkerHeartbeat(runId: run.id, worker: worker, stats: try PostgresJSON(encoding: state.stats))
                progress?(report)
            }

            while true {
                if Task.isCancelled || state.graceOver {
                    // Out of time: what finished is committed, what did not goes back to pending.
                    group.cancelAll()
                    try await commit()
                    try await store.runItemsRelease(runId: run.id, worker: worker, ids: Array(inFlight))
                    return
                }
                if inFlight.count <= batch / 2, !state.shouldStopClaiming() {
                    let items = try await store.runItemsClaim(runId: run.id, worker: worker, limit: batch - inFlight.count, lease: options.lease)
                    for item in items {
                        inFlight.insert(item.originalTransactionId)
                        group.addTask { await self.poller.poll(item, asOf: run.asOf) }
                    }
                    othersHoldTheRest = false
                    if items.isEmpty && inFlight.isEmpty {
                        try await commit()
                        if try await store.runProgress(run.id).finished { return }
                        // Others hold the rest under lease; look again shortly (their leases may expire).
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

    init(outageThreshold: Int) { self.outageThreshold = outageThreshold }

    var stats: WorkerStats { lock.withLock { _stats } }
    var graceOver: Bool { lock.withLock { _graceOver } }
    var abnormalEnding: RunEngine.Ending? { lock.withLock { ending } }

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
    var workersAreDone: Bool { lock.withLock { done } }

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
