import ChurnModel
import ChurnStore
import Foundation
import Logging

extension RunEngine {
    /// Works `run` until it ends. Drained, it is closed, unless items failed only because Apple
    /// rate limited them: those are polled again (``RateLimitedRetryRule``), and when Apple
    /// still refuses them the run stops resumable instead of counting them as the night's result.
    func workAndClose(_ run: RunRecord, locks: RunLocks, progress: (@Sendable (RunProgressReport) -> Void)?) async throws -> RunOutcome {
        update { $0.machine.setRun(run.id, due: run.due) }
        var rounds = 0
        while true {
            if let stop = try await work(run: run, locks: locks, progress: progress) { return await interrupted(run, stop) }
            do {
                let limited = try await persist("progress") { try await self.store.runItemsRateLimitedCount(run.id) }
                switch retryRule.decide(rateLimited: limited, roundsDone: rounds) {
                case .finish:
                    let summary = try await persist("finish") { try await self.store.runFinish(run.id, asOf: run.asOf) }
                    return .finished(summary)
                case .retry:
                    rounds += 1
                    logger.warning("items failed only because Apple rate limited them: polling them again", metadata: [
                        "run": "\(run.id)", "items": "\(limited)", "round": "\(rounds)",
                    ])
                    _ = try await persist("retry") { try await self.store.runItemsRetryRateLimited(run.id) }
                case .stopResumable:
                    let detail = "rate limited: \(limited) items still refused after \(rounds) rounds of retries"
                    return await interrupted(run, .appleUnavailable(detail, rateLimited: true))
                }
            } catch let error where DatabaseConnectionProblem(error) != nil {
                return .stopped(runId: run.id, .database(DatabaseConnectionProblem(error)?.message ?? "\(error)"))
            }
        }
    }

    /// Marks `run` interrupted (resumable) and says how it ended.
    func interrupted(_ run: RunRecord, _ stop: RunStop) async -> RunOutcome {
        if case .database = stop {
            try? await store.runInterrupt(run.id)
        } else {
            try? await persist("interrupt") { try await self.store.runInterrupt(run.id) }
        }
        return .stopped(runId: run.id, stop)
    }
}
