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
        let unfinished = try await store.runFindUnfinishedAll(kind: .nightly)
        let queue = NightlyQueue.decide(unfinished: unfinished.map { .init(runId: $0.id, asOf: $0.asOf) }, tonight: options.asOf)
        var runs = queue.resume.compactMap { id in unfinished.first { $0.id == id } }
        // Items of the earlier runs come back first (dead workers', failed for the whole run),
        // so tonight's plan leaves every open one to its earlier run.
        var recovered: [Int64: Int] = [:]
        for run in runs { recovered[run.id] = try await recoverItems(run) }
        var tonight: Int64?
        if queue.planTonight {
            let (created, byReason) = try await store.runCreateNightly(asOf: options.asOf, windows: options.windows, params: options.params,
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
            tonight = created.id
        }
        var outcome = RunOutcome.nothingToJoin
        for (index, run) in runs.enumerated() {
            if run.id != tonight {
                try await resume(run, recovered: recovered[run.id])
            } else if index > 0 {
                try await store.runResume(run.id)
                logger.info("starting tonight's run", metadata: ["run": "\(run.id)", "as_of": "\(run.asOf.ISO8601Format())"])
            }
            outcome = try await workAndClose(run, locks: locks, progress: progress)
            guard case .finished(let summary) = outcome else {
                // Later runs stay unfinished and are resumed by the next `run`, in order.
                for later in runs[(index + 1)...] { try? await store.runInterrupt(later.id) }
                return outcome
            }
            if index < runs.count - 1 {
                state.closed(summary)
                logger.notice("closed an earlier night's run", metadata: [
                    "run": "\(run.id)", "as_of": "\(run.asOf.ISO8601Format())", "polled": "\(summary.polled)", "failed": "\(summary.failed)",
                ])
            }
        }
        return outcome
    }

    /// A `--join` helper: works every unfinished run of its kind, in the owner's order, until
    /// none is left that it has not drained.
    func joinRuns(locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        var drained: [Int64] = []
        while let run = try await store.runFindUnfinishedAll(kind: options.kind).first(where: { !drained.contains($0.id) }) {
            state.setRun(run.id, due: run.due)
            logger.info("joining run", metadata: ["run": "\(run.id)", "worker": "\(options.workerName)"])
            let ending = try await work(run: run, locks: locks, progress: progress)
            guard case .drained = ending else { return Self.outcome(ending, runId: run.id, polled: state.stats.polled) }
            drained.append(run.id)
        }
        guard let last = drained.last else { return .nothingToJoin }
        return .joinedAndDrained(runId: last, polled: state.stats.polled)
    }
}
