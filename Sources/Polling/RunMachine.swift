import ChurnStore
import Foundation

/// The run engine's rules, as a value: events in, actions out. No clock (time comes in as
/// `now` with every event), no I/O, no locks; ``RunEngine`` carries the actions out.
///
/// A stretch of work has `lanes` lanes (each keeps up to `batch` polls in flight, claims more
/// as they finish and commits finished ones together) and one supervisor (the shutdown grace,
/// the time budget, the lock check). Their shared state is here: the counters, how the work
/// ends, when the heartbeat and the orphan check were last done. docs/architecture.md draws the
/// states.
struct RunMachine: Sendable {
    /// The numbers the rules use.
    struct Rules: Sendable, Equatable {
        /// Polls a lane keeps in flight, and the most it commits together.
        var batch: Int
        /// Lanes working at once.
        var lanes: Int
        /// Consecutive "Apple unavailable" failures (no success between) that end the work.
        var outageThreshold: Int
        /// After a stop, in-flight work gets this long before it is abandoned.
        var shutdownGrace: TimeInterval
        /// A finished poll is committed at once when the last commit is older than this.
        var commitAfter: TimeInterval = 0.25
        /// The heartbeat is written at most this often (per process).
        var heartbeatEvery: TimeInterval = 1
        /// Items of dead workers are looked for at most this often (per process).
        var orphanCheckEvery: TimeInterval = 2
        /// The lock connection is checked this long after the last check ended.
        var lockCheckEvery: TimeInterval = 1
        /// A lane that found nothing to claim while others hold the rest looks again after this
        /// long (the database does not say when others release items or leases expire).
        var lookAgainAfter: TimeInterval = 0.5

        init(batch: Int, lanes: Int, outageThreshold: Int, shutdownGrace: TimeInterval) {
            self.batch = max(1, batch)
            self.lanes = max(1, lanes)
            self.outageThreshold = outageThreshold
            self.shutdownGrace = max(0, shutdownGrace)
        }

        /// `concurrency` polls in flight per process, in lanes of at most `batchSize`.
        init(options: RunOptions) {
            self.init(batch: min(options.batchSize, max(1, options.concurrency)), lanes: options.lanes,
                      outageThreshold: options.outageThreshold, shutdownGrace: options.shutdownGrace)
        }
    }

    /// A finished poll, as the rules see it.
    struct Finished: Sendable, Equatable {
        var id: String
        var failure: ItemFailureClass.Scope?
        /// The failure's text (`failed(reason)`), for an ending's detail.
        var reason: String?
        var calls: [String: Int] = [:]
    }

    /// What a batch commit wrote, as far as the counters go.
    struct Counts: Sendable, Equatable {
        var polled = 0
        var failed = 0
        var events = 0
        var enqueued = 0
    }

    let rules: Rules
    private(set) var stats: WorkerStats
    /// Why the work stops before it drains (the first stop wins); nil: it goes on.
    private(set) var stopping: RunStop?
    /// When the first stop was requested (a signal, the time budget, a failure of the run).
    private(set) var stopRequestedAt: Date?
    /// The time budget's end (the invocation's, over every run it works).
    private(set) var deadline: Date?
    /// When in-flight work is abandoned (set once a stop is requested during work).
    private(set) var graceDeadline: Date?
    private(set) var graceOver = false
    private(set) var working = false
    private var consecutiveOutage = 0
    private var lastHeartbeat = Date.distantPast
    private var lastOrphanCheck = Date.distantPast
    private var nextLockCheck: Date?
    private var lockCheckRunning = false
    private(set) var runId: Int64 = 0
    private var due = 0
    var lanes: [Lane] = []

    init(rules: Rules, startedAt: Date, maxDuration: TimeInterval?) {
        self.rules = rules
        stats = WorkerStats(startedAt: startedAt)
        deadline = maxDuration.map { startedAt.addingTimeInterval($0) }
    }

    // MARK: The shared rules

    /// The run worked from now on (its id and due count go into progress reports).
    mutating func setRun(_ id: Int64, due: Int) {
        runId = id
        self.due = due
    }

    /// A new stretch of work (another run, or another round of the same): fresh lanes.
    mutating func beginWork(now: Date) {
        working = true
        lanes = Array(repeating: Lane(lastCommit: now), count: rules.lanes)
        nextLockCheck = now.addingTimeInterval(rules.lockCheckEvery)
        lockCheckRunning = false
        graceDeadline = stopReason == nil ? nil : now.addingTimeInterval(rules.shutdownGrace)
    }

    /// Every lane has returned.
    mutating func endWork() { working = false }

    /// No new claims; in-flight work gets the grace period. The first stop is kept.
    mutating func stop(_ why: RunStop, now: Date) {
        if stopping == nil {
            stopping = why
            stopRequestedAt = now
        }
        if working, graceDeadline == nil { graceDeadline = now.addingTimeInterval(rules.shutdownGrace) }
    }

    /// A stop on request (a signal, the time budget, an internal error).
    mutating func requestStop(_ reason: String, now: Date) { stop(.requested(reason), now: now) }

    /// The first stop's reason (nil: no stop requested).
    var stopReason: String? { stopping?.reason }

    /// Requests a stop once the time budget (--max-duration) is used up.
    mutating func checkTimeBudget(now: Date) {
        if stopReason == nil, let deadline, now >= deadline {
            requestStop("time budget (--max-duration) used up", now: now)
        }
    }

    /// A stop was requested (a signal, the time budget, a failure): no more claims.
    var claimingStopped: Bool { stopReason != nil }

    /// Why the change feed's sync before planning must stop before its next page (nil: go on);
    /// the time budget counts from the invocation's start, as for the work.
    mutating func feedStopReason(now: Date) -> String? {
        checkTimeBudget(now: now)
        return stopReason
    }

    /// When the sync's page in flight is abandoned: the shutdown grace after the stop request.
    var feedAbandonAt: Date? { stopRequestedAt.map { $0.addingTimeInterval(rules.shutdownGrace) } }

    /// True at most every `heartbeatEvery` per process (and notes the heartbeat as written).
    mutating func heartbeatDue(now: Date) -> Bool {
        guard now.timeIntervalSince(lastHeartbeat) >= rules.heartbeatEvery else { return false }
        lastHeartbeat = now
        return true
    }

    /// True at most every `orphanCheckEvery` per process (and notes the check as done).
    mutating func orphanCheckDue(now: Date) -> Bool {
        guard now.timeIntervalSince(lastOrphanCheck) >= rules.orphanCheckEvery else { return false }
        lastOrphanCheck = now
        return true
    }

    /// Apple calls made outside the lanes (the change feed's sync before planning) count in
    /// the process's calls like the polls'.
    mutating func recordCalls(_ calls: [String: Int]) {
        for (endpoint, n) in calls where n > 0 { stats.calls[endpoint, default: 0] += n }
    }

    /// Adds a committed batch: the counters, and the endings a batch can bring (an Apple
    /// outage past the threshold, a rejected key, an untrusted server).
    mutating func record(_ results: [Finished], _ counts: Counts, now: Date) -> RunProgressReport {
        stats.polled += counts.polled
        stats.failed += counts.failed
        stats.events += counts.events
        stats.enqueued += counts.enqueued
        for r in results {
            for (endpoint, n) in r.calls { stats.calls[endpoint, default: 0] += n }
            switch r.failure {
            case nil, .subscription?:
                consecutiveOutage = 0
            case .appleUnavailable?:
                consecutiveOutage += 1
            case .unauthorized?:
                stop(.unauthorized, now: now)
            case .untrustedServer?:
                stop(.untrustedServer(r.reason ?? "untrusted server"), now: now)
            }
        }
        if consecutiveOutage >= rules.outageThreshold, stopping == nil {
            let detail = results.last { $0.failure == .appleUnavailable }?.reason ?? "Apple unavailable"
            stop(.appleUnavailable(detail), now: now)
        }
        return report(now: now)
    }

    /// What a progress display shows now.
    func report(now: Date) -> RunProgressReport {
        RunProgressReport(runId: runId, due: due, polled: stats.polled, failed: stats.failed, calls: stats.calls,
                          elapsed: now.timeIntervalSince(stats.startedAt))
    }

    /// Items this process holds right now (every lane's, in flight or finished and not yet
    /// committed).
    var inFlight: [String] { lanes.flatMap { $0.inFlight.sorted() + $0.finished.map(\.id) } }


    // MARK: The supervisor

    /// What the supervisor does next.
    enum SupervisorAction: Sendable, Equatable {
        /// The grace period is over: cancel in-flight work (its items go back to pending).
        case abandonInFlight
        /// Check the lock connection (take the locks again after a PostgreSQL restart).
        case keepLocks
        /// Nothing until this time (nil: until a lane returns or a stop is requested).
        case wait(until: Date?)
    }

    /// The supervisor's next step while lanes work.
    mutating func supervise(now: Date) -> SupervisorAction {
        guard working, !graceOver else { return .wait(until: nil) }
        if let graceDeadline, now >= graceDeadline {
            graceOver = true
            return .abandonInFlight
        }
        checkTimeBudget(now: now)
        if !lockCheckRunning, let check = nextLockCheck, now >= check {
            lockCheckRunning = true
            nextLockCheck = nil
            return .keepLocks
        }
        let times = [graceDeadline, stopReason == nil ? deadline : nil, lockCheckRunning ? nil : nextLockCheck]
        return .wait(until: times.compactMap { $0 }.min())
    }

    /// The lock check has returned.
    mutating func locksKept(now: Date) {
        lockCheckRunning = false
        nextLockCheck = now.addingTimeInterval(rules.lockCheckEvery)
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
