import ChurnStore
import Foundation

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
    private var _closedEarlier: [RunSummary] = []

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

    /// A new stretch of work (another run, or another round of the same): the grace watchdog
    /// waits again.
    func beginWork() { lock.withLock { done = false } }

    /// Runs closed before the current one (earlier nights).
    var closedEarlier: [RunSummary] { lock.withLock { _closedEarlier } }
    func closed(_ summary: RunSummary) { lock.withLock { _closedEarlier.append(summary) } }

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
                    if case .failed(_, let reason) = r.write.outcome { detail = reason }
                    if ending == nil { ending = .untrustedServer(detail) }
                    stopFor = detail
                }
            }
            if consecutiveOutage >= outageThreshold, ending == nil {
                let last = results.last { $0.failure == .appleUnavailable }
                var detail = "Apple unavailable"
                if case .failed(_, let reason)? = last?.write.outcome { detail = reason }
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
