import ChurnModel
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

    /// Where the machine is: each phase with the data it needs, and nothing else.
    enum State: Sendable, Equatable {
        /// No lanes working and nothing asked to stop (before the first stretch of work,
        /// between runs, after a run drained).
        case idle
        /// Lanes are working, no stop asked.
        case working(LockCheck)
        /// A stop was asked (``Stop``). With lanes working (`work`), their in-flight polls
        /// have until `work.graceEnds`; without, the next stretch of work gets the grace from
        /// its start.
        case stopping(Stop, work: StoppingWork?)
        /// The grace is over: what is still in flight is abandoned (released, never committed).
        case abandoned(Stop)
    }

    /// A stop and when it was asked (the first one wins).
    struct Stop: Sendable, Equatable {
        var why: RunStop
        var at: Date
    }

    /// Lanes still working after a stop: until when, and the lock check meanwhile.
    struct StoppingWork: Sendable, Equatable {
        var graceEnds: Date
        var lockCheck: LockCheck
    }

    /// The lock connection's check while lanes work: next due at a time, or running now.
    enum LockCheck: Sendable, Equatable {
        case due(Date)
        case running
    }

    /// How a stretch of work ended (``endWork()``).
    struct WorkEnded: Sendable, Equatable {
        /// Why the work stopped before the run drained (nil: it drained).
        var stop: RunStop?
        /// The grace ran out: put every item this process still holds back to pending.
        var releaseAll: Bool
    }

    let rules: Rules
    private(set) var state: State = .idle
    private(set) var stats: WorkerStats
    /// The invocation's time budget and shutdown grace (`--max-duration`, `--shutdown-grace`).
    let budget: StopBudget
    private var consecutiveOutage = 0
    private var lastHeartbeat = Date.distantPast
    private var lastOrphanCheck = Date.distantPast
    private(set) var runId: Int64 = 0
    private var due = 0
    /// The lanes of the stretch of work (driven one event at a time by ``lane(_:_:cancelled:now:)``).
    private var lanes: [Lane] = []

    init(rules: Rules, startedAt: Date, maxDuration: TimeInterval?) {
        self.rules = rules
        stats = WorkerStats(startedAt: startedAt)
        budget = StopBudget(startedAt: startedAt, maxDuration: maxDuration, grace: rules.shutdownGrace)
    }

    // MARK: What the state says

    /// Why the work stops before it drains (the first stop wins); nil: it goes on.
    var stopping: RunStop? {
        switch state {
        case .idle, .working: nil
        case .stopping(let stop, _), .abandoned(let stop): stop.why
        }
    }

    /// The first stop's reason (nil: no stop requested).
    var stopReason: String? { stopping?.reason }

    /// When in-flight work is abandoned (a stop asked during work).
    var graceDeadline: Date? {
        if case .stopping(_, let work?) = state { return work.graceEnds }
        return nil
    }

    /// The grace is over: in-flight work is abandoned.
    var graceOver: Bool { if case .abandoned = state { true } else { false } }

    /// A stop was requested (a signal, the time budget, a failure): no more claims.
    var claimingStopped: Bool { stopping != nil }

    // MARK: The shared rules

    /// The run worked from now on (its id and due count go into progress reports).
    mutating func setRun(_ id: Int64, due: Int) {
        runId = id
        self.due = due
    }

    /// A new stretch of work (another run, or another round of the same): fresh lanes; returns
    /// how many the driver starts. A stop asked before gives the grace from now.
    @discardableResult
    mutating func beginWork(now: Date) -> Int {
        lanes = Array(repeating: Lane(lastCommit: now), count: rules.lanes)
        let lockCheck = LockCheck.due(now.addingTimeInterval(rules.lockCheckEvery))
        switch state {
        case .idle, .working: state = .working(lockCheck)
        case .stopping(let stop, _): state = .stopping(stop, work: StoppingWork(graceEnds: budget.abandonAt(stoppedAt: now), lockCheck: lockCheck))
        case .abandoned: break
        }
        return rules.lanes
    }

    /// Every lane has returned: how the stretch of work ended.
    mutating func endWork() -> WorkEnded {
        switch state {
        case .idle, .working:
            state = .idle
            return WorkEnded(stop: nil, releaseAll: false)
        case .stopping(let stop, _):
            state = .stopping(stop, work: nil)
            return WorkEnded(stop: stop.why, releaseAll: false)
        case .abandoned(let stop):
            return WorkEnded(stop: stop.why, releaseAll: true)
        }
    }

    /// No new claims; in-flight work gets the grace period. The first stop is kept. (The
    /// driver wakes its supervisor whenever a stop shows, whichever input brought it.)
    mutating func stop(_ why: RunStop, now: Date) {
        switch state {
        case .idle: state = .stopping(Stop(why: why, at: now), work: nil)
        case .working(let lockCheck):
            state = .stopping(Stop(why: why, at: now), work: StoppingWork(graceEnds: budget.abandonAt(stoppedAt: now), lockCheck: lockCheck))
        case .stopping, .abandoned: break
        }
    }

    /// Requests a stop once the time budget (--max-duration) is used up.
    private mutating func checkTimeBudget(now: Date) {
        if stopping == nil, budget.usedUp(at: now) { stop(.timeBudget, now: now) }
    }

    /// Why the change feed's sync before planning must stop before its next page (nil: go on);
    /// the time budget counts from the invocation's start, as for the work.
    mutating func feedStopReason(now: Date) -> RunStop? {
        checkTimeBudget(now: now)
        return stopping
    }

    /// When the sync's page in flight is abandoned: the shutdown grace after the stop request.
    var feedAbandonAt: Date? {
        switch state {
        case .idle, .working: nil
        case .stopping(let stop, _), .abandoned(let stop): budget.abandonAt(stoppedAt: stop.at)
        }
    }

    /// True at most every `heartbeatEvery` per process (and notes the heartbeat as written).
    private mutating func heartbeatDue(now: Date) -> Bool {
        guard now.timeIntervalSince(lastHeartbeat) >= rules.heartbeatEvery else { return false }
        lastHeartbeat = now
        return true
    }

    /// True at most every `orphanCheckEvery` per process (and notes the check as done).
    private mutating func orphanCheckDue(now: Date) -> Bool {
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
    /// outage or rate limit past the threshold, a rejected key, an untrusted server: the
    /// mapping of a failure's scope to a stop is ``RunStop/init(_:detail:)``, the only one).
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
            case .appleUnavailable?, .rateLimited?:
                // An outage, or 429s past the wait budget: the run stops after enough in a row.
                consecutiveOutage += 1
            case let scope?:
                // Nothing sent to Apple can succeed until it is fixed: stop at once.
                if let why = RunStop(scope, detail: r.reason ?? "\(scope)") { stop(why, now: now) }
            }
        }
        if consecutiveOutage >= rules.outageThreshold, stopping == nil,
           let last = results.last(where: { $0.failure == .appleUnavailable || $0.failure == .rateLimited }),
           let why = RunStop(last.failure ?? .appleUnavailable, detail: last.reason ?? "Apple unavailable") {
            stop(why, now: now)
        }
        return report(now: now)
    }

    // MARK: The lanes

    /// Applies `event` to lane `i` and says what it does next. `cancelled`: the lane's task was
    /// cancelled meanwhile (the grace period ran out); a poll that finished then is not committed.
    mutating func lane(_ i: Int, _ event: LaneEvent, cancelled: Bool = false, now: Date) -> LaneAction {
        if cancelled { lanes[i].cancelled() }
        let working = lanes[i].working(graceOver: false)
        let recoverOrphans = working && event == .progressChecked(runFinished: false) ? orphanCheckDue(now: now) : false
        lanes[i].apply(event, graceOver: graceOver, recoverOrphans: recoverOrphans, rules: rules, now: now)
        if lanes[i].working(graceOver: graceOver) { checkTimeBudget(now: now) }
        let action = lanes[i].next(graceOver: graceOver, claimingStopped: claimingStopped, rules: rules, now: now)
        if case .recoverOrphans = action { return .recoverOrphans(keep: inFlight) }
        return action
    }

    /// Lane `i`'s finished polls are committed (with these counts): counters, endings, the
    /// heartbeat rule. The lane goes on with ``lane(_:_:cancelled:now:)`` and `.proceed`.
    mutating func committed(lane i: Int, counts: Counts, now: Date) -> Commit {
        let batch = lanes[i].committed(now: now)
        let report = record(batch, counts, now: now)
        return Commit(report: report, heartbeat: heartbeatDue(now: now))
    }

    /// Items this process holds right now (every lane's, in flight or finished and not yet
    /// committed).
    var inFlight: [String] { lanes.flatMap { $0.inFlight.sorted() + $0.finished.map(\.id) } }

    /// What a progress display shows now.
    func report(now: Date) -> RunProgressReport {
        RunProgressReport(runId: runId, due: due, polled: stats.polled, failed: stats.failed, calls: stats.calls,
                          elapsed: now.timeIntervalSince(stats.startedAt))
    }


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
        if case .stopping(let stop, let work?) = state, now >= work.graceEnds {
            state = .abandoned(stop)
            return .abandonInFlight
        }
        checkTimeBudget(now: now)
        let lockCheck: LockCheck
        switch state {
        case .idle, .abandoned, .stopping(_, work: nil): return .wait(until: nil)
        case .working(let check): lockCheck = check
        case .stopping(_, let work?): lockCheck = work.lockCheck
        }
        if case .due(let at) = lockCheck, now >= at {
            setLockCheck(.running)
            return .keepLocks
        }
        let lockAt: Date? = if case .due(let at) = lockCheck { at } else { nil }
        let times = [graceDeadline, stopping == nil ? budget.deadline : nil, lockAt]
        return .wait(until: times.compactMap { $0 }.min())
    }

    /// The lock check has returned: the next is due `lockCheckEvery` after it.
    mutating func locksKept(now: Date) {
        setLockCheck(.due(now.addingTimeInterval(rules.lockCheckEvery)))
    }

    private mutating func setLockCheck(_ check: LockCheck) {
        switch state {
        case .working: state = .working(check)
        case .stopping(let stop, var work?):
            work.lockCheck = check
            state = .stopping(stop, work: work)
        case .idle, .abandoned, .stopping(_, work: nil): break
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
