import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging

extension RunEngine {
    /// What this process's sync of the change feed did before it planned (nil: no sync).
    public var feedSummary: FeedSummary? { state.withLock { $0.feed } }

    /// The nightly owner's first step with the feed on: syncs Apple's notification histories
    /// (``FeedSync/environments``) and the inbox, then says for which environments planning may
    /// trust the feed: the sync read that environment's history up to now with no gap, and the
    /// database has seen its notifications (an app without a notification URL has an empty
    /// feed and is planned by the windows, exactly as without the feed).
    ///
    /// The feed's failures never fail the run: Apple not answering a history leaves that
    /// environment's subscriptions to the windows tonight. Another process syncing right now
    /// is waited for (a sync takes seconds; planning without it would poll by the windows while
    /// it applies). A PostgreSQL restart is ridden out like one mid-run (the sync is safe to repeat).
    func syncFeed(_ feed: FeedSync, locks: RunLocks) async throws -> Set<AppStoreEnvironment> {
        guard try await takeFeedLock(locks) else {
            logger.notice("another process is still syncing the change feed: planning by the windows tonight")
            return []
        }
        let asOf = options.asOf
        // A signal or the time budget stops the sync between pages; the grace bounds the page in flight.
        let clock = self.clock
        let control = FeedStopControl(reason: { [self] in let now = clock.now(); return update { $0.machine.feedStopReason(now: now) } },
                                      abandonAt: { [self] in state.withLock { $0.machine.feedAbandonAt } }, clock: clock)
        let summary = try await persist("feed sync") { try await feed.sync(now: asOf, control: control) }
        await locks.release(store.feedLockKey)
        update {
            $0.feed = summary
            $0.machine.recordCalls([AppStoreEndpoint.notificationHistory.rawValue: summary.pages])
        }
        var metadata: Logger.Metadata = [
            "read": "\(summary.read)", "pages": "\(summary.pages)", "applied": "\(summary.applied)",
            "duplicates": "\(summary.duplicates)", "stale": "\(summary.stale)", "quarantined": "\(summary.quarantined)",
            "ignored": "\(summary.ignored)", "registered": "\(summary.registered)", "events": "\(summary.events)",
        ]
        if let gap = summary.gap { metadata["gap"] = "\(gap.lowerBound.ISO8601Format())..\(gap.upperBound.ISO8601Format())" }
        if let asked = summary.stop, asked.isAskedFor {
            logger.notice("the change feed's sync stopped (the next run resumes it)", metadata: metadata.merging(["reason": "\(asked.reason)"]) { $1 })
            return []
        }
        if let failure = summary.stop {
            metadata["error"] = "\(failure.detail)"
            logger.warning("the change feed stopped early: planning by the windows tonight where it did (the next sync resumes)",
                           metadata: metadata)
        } else {
            logger.info("synced the change feed", metadata: metadata)
        }
        if let sandbox = summary.sandboxFailure {
            logger.warning("the Sandbox history is unavailable: Production's night goes on; Sandbox subscriptions are planned by the windows tonight (held back until its first sync reads through), and the next sync retries from its cursor",
                           metadata: ["error": "\(sandbox.detail)"])
        }
        if summary.gap != nil {
            logger.warning("the change feed has a gap (the cursor is older than Apple's history): planning by the windows tonight")
        }
        var live = Set<AppStoreEnvironment>()
        for environment in summary.readThrough {
            if try await persist("feed check", { try await self.store.notificationsSeen(environment: environment) }) {
                live.insert(environment)
            }
        }
        return live
    }

    /// What this process's pass over the open refund requests did (nil: none).
    public var refundSummary: RefundAnswerSummary? { state.withLock { $0.refunds } }

    /// Answers the open refund requests, deadlines judged by the run's moment moving on with
    /// the clock; a stop asked for meanwhile ends the pass between requests. Its failures never
    /// fail the run: what is not answered stays open for the next sync.
    func answerRefunds(_ answerer: RefundAnswerer) async {
        let clock = self.clock
        let (asOf, started) = (options.asOf, clock.now())
        do {
            var summary = try await answerer.answerOpen(
                now: { asOf.addingTimeInterval(clock.now().timeIntervalSince(started)) },
                shouldStop: { [self] in let now = clock.now(); return update { $0.machine.feedStopReason(now: now) } })
            // Requests the sync read after their deadline are past it too (recorded so on reading).
            summary.expired += feedSummary?.lateRefundRequests ?? 0
            update {
                $0.refunds = summary
                $0.machine.recordCalls([AppStoreEndpoint.consumption.rawValue: summary.sent])
            }
        } catch {
            logger.warning("could not answer the refund requests (the next sync tries again)", metadata: ["error": "\(error)"])
        }
    }

    /// The feed's lock, waiting up to `RunOptions.feedLockWait` for a sync that holds it.
    private func takeFeedLock(_ locks: RunLocks) async throws -> Bool {
        let deadline = clock.now().addingTimeInterval(options.feedLockWait)
        while true {
            if try await locks.take(store.feedLockKey, name: "feed") { return true }
            guard clock.now() < deadline else { return false }
            try await clock.sleep(until: min(deadline, clock.now().addingTimeInterval(0.25)))
        }
    }
}
