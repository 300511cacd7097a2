import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Synchronization

/// How a run is carried out.
public struct RunOptions: Sendable {
    public var asOf: Date
    public var windows = PlanWindows()
    /// Apple requests in flight at once (per process).
    public var concurrency = 32
    /// Items claimed and committed together.
    public var batchSize = 32
    /// Lanes of work in this process: `concurrency` polls in flight, in lanes of at most
    /// `batchSize` (each lane claims and commits on a connection of its own).
    public var lanes: Int { max(1, (concurrency + batchSize - 1) / max(1, batchSize)) }
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
    /// The change feed (`CHURNWATCH_NOTIFICATIONS=on`): the nightly run syncs it before it
    /// plans, and plans by it while it is live. nil: the windows alone.
    public var feed: FeedSync?
    /// How long the nightly run waits for a sync another process holds (`notifications sync`
    /// from cron) before planning by the windows without it.
    public var feedLockWait: TimeInterval = 120
    /// Answers the refund requests the feed recorded, right after the feed's sync (nil: off).
    public var refunds: RefundAnswerer?

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
    /// Tonight's run (this id) finished already: the night is done, nothing was planned.
    case nightDone(runId: Int64)
    /// `backfill --resume` with no unfinished backfill.
    case nothingToResume
    /// A backfill of another cohort is unfinished: one backfill at a time.
    case otherBackfillUnfinished(runId: Int64, cohort: String)
    /// Stopped before it was done (``RunStop`` says why); the next `run` resumes it. No run id:
    /// stopped in the change feed's sync, before planning (the next sync resumes from its cursor).
    case stopped(runId: Int64?, RunStop)
}

/// Counters one process keeps while it works a run (also written to its heartbeat).
public struct WorkerStats: Sendable, Codable, Equatable {
    public var polled = 0
    public var failed = 0
    public var events = 0
    public var enqueued = 0
    public var calls: [String: Int] = [:]
    public var startedAt: Date

    public init(startedAt: Date) { self.startedAt = startedAt }
}

/// One process working one run: plans it (when it owns it), claims batches, polls Apple
/// concurrently within a shared budget, commits each batch in one transaction, and closes the
/// run when nothing is left. Stops cleanly on request.
public final class RunEngine: Sendable {
    let store: ChurnStore
    let poller: SubscriptionPoller
    let options: RunOptions
    let logger: Logger
    /// The time the engine works by (progress and metrics read it too).
    public let clock: any RunClock
    /// The rules' state and what the driver keeps beside it, touched briefly by the lanes, the
    /// supervisor and a signal handler.
    let state: Mutex<Shared>
    let retryRule = RateLimitedRetryRule()

    /// `clock`: the time the engine works by (tests can pass their own).
    public init(store: ChurnStore, poller: SubscriptionPoller, options: RunOptions, logger: Logger,
                clock: any RunClock = SystemRunClock()) {
        self.store = store
        self.poller = poller
        self.options = options
        self.logger = logger
        self.clock = clock
        let machine = RunMachine(rules: RunMachine.Rules(options: options), startedAt: clock.now(), maxDuration: options.maxDuration)
        self.state = Mutex(Shared(machine: machine))
    }

    /// Asks the run to stop (a signal): no new claims; in-flight batches finish within the grace period.
    public func requestStop(_ stop: RunStop = .signal) {
        let now = clock.now()
        update { $0.machine.stop(stop, now: now) }
    }

    /// The counters so far.
    public var stats: WorkerStats { state.withLock { $0.machine.stats } }

    /// Runs (or resumes, or joins) and returns how it ended. `progress` is called after every
    /// committed batch. The nightly owner may work several runs: unfinished ones of earlier
    /// nights first, then tonight's (``NightlyQueue``); the outcome is the last one's, and the
    /// runs closed before it are in ``closedEarlier``.
    public func run(progress: (@Sendable (RunProgressReport) -> Void)? = nil) async throws -> RunOutcome {
        // This process's locks live on a connection of their own for the whole run: its worker
        // lock (others see it is alive) and, for the owner, the run lock of its kind. They are
        // released before `run` returns, so a run started right after this one (another
        // process, or the next invocation of a cron job) is never told "in progress" by them.
        let locks = store.runLocksOpen(logger: logger)
        do {
            let outcome = try await run(holding: locks, progress: progress)
            await locks.close()
            return outcome
        } catch {
            await locks.close()
            throw error
        }
    }

    private func run(holding locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        let kind = options.kind
        _ = try await locks.take(ChurnStore.workerLockKey(options.workerName), name: "worker")
        if options.join { return try await joinRuns(locks: locks, progress: progress) }
        guard try await locks.take(store.runLockKey(kind), name: "\(kind.rawValue) run") else {
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
    public var closedEarlier: [RunSummary] { state.withLock { $0.closedEarlier } }

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
}
