import AppStoreModels
import ChurnModel
import ChurnStore
import Foundation
import Logging

extension RunEngine {
    /// The nightly owner: unfinished runs of earlier nights are resumed and closed first, oldest
    /// first, each writing its own day of history; tonight's run is planned before them (so a
    /// stop meanwhile cannot cost tonight its run) and worked after them (``NightlyQueue``).
    /// Tonight's plan leaves out what is still open in the earlier runs: those subscriptions are
    /// polled there, tonight, before tonight's run, and not twice.
    func runNights(locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        var windows = options.windows
        if let feed = options.feed {
            windows.feedEnvironments = try await syncFeed(feed, locks: locks)
            if let asked = feedSummary?.stop, asked.isAskedFor { return .stopped(runId: nil, asked) }
            // A refused key would refuse the answers too; a first sync cut short has read no request.
            switch try await persist("feed check", { try await self.feedGate(feed) }) {
            case .stop(let stop): return .stopped(runId: nil, stop)
            case .plan(let held): windows.heldEnvironments = held
            }
            if let answerer = options.refunds { await answerRefunds(answerer) }
        }
        guard let plan = try await planNights(locks: locks, windows: windows) else {
            return .anotherRunInProgress(runId: try await store.runFindUnfinished(kind: .nightly)?.id)
        }
        let (runs, tonight, recovered) = (plan.runs, plan.tonight, plan.recovered)
        if runs.isEmpty, let done = plan.done {
            logger.info("tonight's run finished already: nothing planned", metadata: ["run": "\(done)"])
            return .nightDone(runId: done)
        }
        var outcome = RunOutcome.nothingToJoin
        for (index, run) in runs.enumerated() {
            if run.id != tonight {
                let known = recovered[run.id]
                try await persist("resume") { try await self.resume(run, recovered: known) }
            } else if index > 0 {
                try await persist("resume") { try await self.store.runResume(run.id) }
                logger.info("starting tonight's run", metadata: ["run": "\(run.id)", "as_of": "\(run.asOf.ISO8601Format())"])
            }
            outcome = try await workAndClose(run, locks: locks, progress: progress)
            guard case .finished(let summary) = outcome else {
                // Later runs stay unfinished and are resumed by the next `run`, in order.
                for later in runs[(index + 1)...] { try? await store.runInterrupt(later.id) }
                return outcome
            }
            if index < runs.count - 1 {
                update { $0.closedEarlier.append(summary) }
                logger.notice("closed an earlier night's run", metadata: [
                    "run": "\(run.id)", "as_of": "\(run.asOf.ISO8601Format())", "polled": "\(summary.polled)", "failed": "\(summary.failed)",
                ])
            }
        }
        return outcome
    }

    /// What a night's invocation works, in order, and what was recovered in each earlier run.
    struct NightPlan: Sendable {
        var runs: [RunRecord]
        var tonight: Int64?
        var recovered: [Int64: Int]
        /// Tonight's run, finished already (``NightlyQueue/doneTonight``).
        var done: Int64?
    }

    /// What the night does after the change feed's sync: stop before planning, or plan with the
    /// subscriptions of some environments held back.
    enum FeedGate: Sendable, Equatable {
        case stop(RunStop)
        /// Plan, leaving out the subscriptions of these environments (``PlanWindows/heldEnvironments``).
        case plan(held: Set<AppStoreEnvironment>)
    }

    /// Apple refusing the key (or a server not trusted) stops the night: every poll would fail
    /// alike. The deployment's own environment whose first sync is not read through (Apple
    /// unavailable, however many nights it takes) stops it too: a run planned before the sync
    /// established the subscriptions would poll them first, and the history read later would
    /// be logged as news. In a Production deployment, a Sandbox whose first sync is not read
    /// through holds back only the Sandbox subscriptions: a Sandbox outage (or an egress proxy
    /// that allows only Production) never stops a Production night.
    func feedGate(_ feed: FeedSync) async throws -> FeedGate {
        if let stop = feedSummary?.stop, stop.refusesEveryCall { return .stop(stop) }
        var held = Set<AppStoreEnvironment>()
        for environment in feed.environments where try await store.feedStateRead(environment: environment).cursor.syncedUntil == nil {
            held.insert(environment)
        }
        if held.contains(feed.environment), let stop = feedSummary?.stop ?? feedSummary?.sandboxFailure {
            logger.notice("the change feed's first sync is not read through: nothing planned before it is (the next run resumes it)",
                          metadata: ["environment": "\(feed.environment.rawValue)", "error": "\(stop.detail)"])
            return .stop(stop)
        }
        for environment in held.sorted(by: { $0.rawValue < $1.rawValue }) {
            logger.warning("the \(environment.rawValue) history's first sync is not read through: its subscriptions are not planned until it is (the next sync retries from its cursor)",
                           metadata: ["environment": "\(environment.rawValue)", "error": "\(feedSummary?.sandboxFailure?.detail ?? "-")"])
        }
        return .plan(held: held)
    }

    /// Plans the night. A PostgreSQL restart meanwhile is ridden out like one mid-run: planning
    /// is safe to repeat from the start (a plan of tonight that did commit is found and resumed,
    /// never planned twice), and every attempt first makes sure the run lock is still this
    /// process's (a restart drops it). nil: another process took the lock meanwhile.
    func planNights(locks: RunLocks, windows: PlanWindows) async throws -> NightPlan? {
        let runLock = store.runLockKey(.nightly)
        return try await persist("plan") { () async throws -> NightPlan? in
            guard await locks.keep() else {
                throw DatabaseConnectionProblem.lostError("the lock connection is not back yet")
            }
            guard locks.holds(runLock) else { return nil }
            return try await self.planNightsOnce(windows: windows)
        }
    }

    private func planNightsOnce(windows: PlanWindows) async throws -> NightPlan {
        let unfinished = try await store.runFindUnfinishedAll(kind: .nightly)
        let finished = try await store.runFindFinished(kind: .nightly, asOfIn: NightlyQueue.nightRange(options.asOf))
        let queue = NightlyQueue.decide(unfinished: unfinished.map { .init(runId: $0.id, asOf: $0.asOf) },
                                        finishedTonight: finished.map { .init(runId: $0.id, asOf: $0.asOf) }, tonight: options.asOf)
        var runs = queue.resume.compactMap { id in unfinished.first { $0.id == id } }
        // Items of the earlier runs come back first (dead workers', failed for the whole run),
        // so tonight's plan leaves every open one to its earlier run.
        var recovered: [Int64: Int] = [:]
        for run in runs { recovered[run.id] = try await recoverItems(run) }
        guard queue.planTonight else { return NightPlan(runs: runs, tonight: nil, recovered: recovered, done: queue.doneTonight) }
        let (created, byReason) = try await store.runCreateNightly(asOf: options.asOf, windows: windows, params: options.params,
                                                                   behind: runs.map(\.id))
        logger.info("planned run", metadata: [
            "run": "\(created.id)", "due": "\(created.due)",
            "by_reason": "\(byReason.sorted { $0.key.priority < $1.key.priority }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " "))",
        ])
        if !runs.isEmpty {
            try await store.runMarkWaiting(created.id)
            logger.notice("an earlier night's run is unfinished: finishing it first, then tonight's", metadata: [
                "earlier_runs": "\(runs.map { "\($0.id) (as of \($0.asOf.ISO8601Format()))" }.joined(separator: ", "))",
                "tonight": "\(created.id)",
            ])
        }
        runs.append(created)
        return NightPlan(runs: runs, tonight: created.id, recovered: recovered)
    }

    /// A `--join` helper: works every unfinished run of its kind, in the owner's order, until
    /// none is left that it has not drained.
    func joinRuns(locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        var drained: [Int64] = []
        while let run = try await store.runFindUnfinishedAll(kind: options.kind).first(where: { !drained.contains($0.id) }) {
            update { $0.machine.setRun(run.id, due: run.due) }
            logger.info("joining run", metadata: ["run": "\(run.id)", "worker": "\(options.workerName)"])
            if let stop = try await work(run: run, locks: locks, progress: progress) { return .stopped(runId: run.id, stop) }
            drained.append(run.id)
        }
        guard let last = drained.last else { return .nothingToJoin }
        return .joinedAndDrained(runId: last, polled: stats.polled)
    }
}
