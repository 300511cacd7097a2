import AppStoreServerAPI
import ChurnStore
import Foundation
import Logging

extension RunEngine {
    /// What this process's sync of the change feed did before it planned (nil: no sync).
    public var feedSummary: FeedSummary? { state.withLock { $0.feed } }

    /// The nightly owner's first step with the feed on: syncs Apple's notification history and
    /// the inbox, then says whether planning may trust the feed: the sync read up to now with
    /// no gap, and the database has seen notifications (an app without a notification URL has
    /// an empty feed and is planned by the windows, exactly as without the feed).
    ///
    /// The feed's failures never fail the run: Apple not answering the history, or another
    /// process syncing right now, leaves tonight to the windows. A PostgreSQL restart is ridden
    /// out like one mid-run (the sync is safe to repeat).
    func syncFeed(_ feed: FeedSync, locks: RunLocks) async throws -> Bool {
        guard try await locks.take(ChurnStore.feedLockKey, name: "feed") else {
            logger.notice("another process is syncing the change feed: planning by the windows tonight")
            return false
        }
        let asOf = options.asOf
        let summary = try await persist("feed sync") { try await feed.sync(now: asOf) }
        await locks.release(ChurnStore.feedLockKey)
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
        if let failure = summary.failure {
            metadata["error"] = "\(failure)"
            logger.warning("the change feed stopped early: planning by the windows tonight (the next sync resumes)", metadata: metadata)
            return false
        }
        logger.info("synced the change feed", metadata: metadata)
        if summary.gap != nil {
            logger.warning("the change feed has a gap (the cursor is older than Apple's history): planning by the windows tonight")
            return false
        }
        return try await persist("feed check") { try await self.store.notificationsSeen() }
    }
}
