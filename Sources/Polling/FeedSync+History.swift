import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation

extension FeedSync {
    /// Reads Apple's notification history from the stored cursor up to `now` and applies it,
    /// then the inbox. The cursor is stored after every commit (with the next page's token), so
    /// a sync killed anywhere resumes on the same request body; the pages read again after the
    /// last stored cursor are duplicates and change nothing.
    ///
    /// Apple failing (an outage, a refused key) ends the history part early with
    /// ``FeedSummary/stop`` set (``AppleAnswer/stop(_:prefix:)``) and the cursor where it was:
    /// the caller plans by the windows. In a Production deployment the Sandbox history's
    /// failure is ``FeedSummary/sandboxFailure`` instead: Production's work is done.
    ///
    /// `stop` (a signal, the time budget) is asked before every page: once it gives one, what
    /// was read is committed with its cursor and the sync returns with ``FeedSummary/stop`` set
    /// to it (the next sync resumes on the stored page token).
    public func sync(now: Date, runId: Int64? = nil, stop: @Sendable () -> RunStop? = { nil }) async throws -> FeedSummary {
        var summary = FeedSummary()
        for environment in environments {
            var part = try await syncHistory(environment, now: now, runId: runId, stop: stop)
            if environment != self.environment, let failure = part.stop, !failure.isAskedFor {
                // The Sandbox of a Production deployment: its failure is reported, not a stop
                // (a page cut by a stop asked meanwhile is that stop).
                part.stop = stop()
                if part.stop == nil { part.sandboxFailure = failure }
            }
            summary.merge(part)
            if summary.stop?.isAskedFor == true { return summary }
            // A refused key or an untrusted server is the deployment's fault, not one history's:
            // nothing more is read until it is fixed (Production's is read first).
            if part.stop?.refusesEveryCall == true { break }
        }
        summary.add(try await drainInbox(now: now, runId: runId))
        return summary
    }

    /// One environment's history, from its own cursor.
    func syncHistory(_ environment: AppStoreEnvironment, now: Date, runId: Int64?,
                     stop: @Sendable () -> RunStop? = { nil }) async throws -> FeedSummary {
        let state = try await store.feedStateRead(environment: environment)
        var cursor = state.cursor
        // The first sync (resumed too, if it was cut short) establishes state.
        let establishOnly = cursor.syncedUntil == nil
        var window = NotificationFeedRules.nextWindow(
            cursor, now: EpochMilliseconds(now).rawValue, overlap: Int64(settings.overlap * 1000),
            firstLookback: Int64(settings.firstLookback * 1000), retentionDays: environment == .sandbox ? 30 : 180)
        var summary = FeedSummary()
        summary.gap = window.gap.map { EpochMilliseconds($0.lowerBound).date..<EpochMilliseconds($0.upperBound).date }
        var pending: [(payload: String, inboxId: Int64?)] = []
        var pendingRecords = 0
        var restarted = false
        // What was read is committed, and the cursor follows it: the next sync resumes on the
        // page after it. (Where a batch ends changes nothing in the end state: FeedApplier
        // establishes a first sync's subscriptions the same way in any cut.)
        func commitRead() async throws {
            summary.add(try await flush(&pending, environment: environment, establishOnly: establishOnly, runId: runId, now: now))
            if pendingRecords > 0 || cursor != state.cursor {
                try await store.feedCursorWrite(environment: environment, cursor: cursor, records: pendingRecords, finishedAt: nil)
            }
        }
        while true {
            if let asked = stop() {
                try await commitRead()
                summary.stop = asked
                return summary
            }
            let request = NotificationHistoryRequest(startDate: EpochMilliseconds(window.start), endDate: EpochMilliseconds(window.end))
            let page: NotificationHistoryPage
            switch await client.notificationHistoryPage(request, paginationToken: window.paginationToken, environment: environment) {
            case .success(let p): page = p
            case .badRequest(let code) where !restarted && window.paginationToken != nil
                && (code == .invalidPaginationToken || code == .paginationTokenExpired):
                // The stored token is no longer good: the same window again from its first page.
                logger.notice("notification history refused the stored page token: reading the window again",
                              metadata: ["code": "\(code.map { "\($0.rawValue)" } ?? "-")"])
                restarted = true
                window = NotificationFeedRules.restart(window)
                continue
            case let failed:
                try await commitRead()
                let prefix = environment == self.environment ? "" : "\(environment.rawValue) history: "
                // A failure of the request's own (a 400 not about the token, a malformed page)
                // stops this history as an outage would: the windows cover it tonight.
                let (reason, _) = AppleAnswer.classify(failed)
                summary.stop = AppleAnswer.stop(failed, prefix: prefix) ?? .appleUnavailable(prefix + reason, rateLimited: false)
                return summary
            }
            summary.pages += 1
            pending += page.records.map { ($0.signedPayload ?? "", nil) }
            pendingRecords += page.records.count
            let next = NotificationFeedRules.advance(cursor, window: window, nextToken: page.paginationToken)
            // Committed in batches; the cursor follows each commit, never ahead of it.
            if pending.count >= settings.batchSize || !page.hasMore {
                summary.add(try await flush(&pending, environment: environment, establishOnly: establishOnly, runId: runId, now: now))
                if establishOnly, !page.hasMore {
                    // Before the cursor says the first sync is done (a stop here repeats it).
                    summary.enqueued += try await enqueueEstablished(environment, now: now, runId: runId)
                }
                try await store.feedCursorWrite(environment: environment, cursor: next, records: pendingRecords, finishedAt: page.hasMore ? nil : now)
                pendingRecords = 0
            }
            cursor = next
            guard page.hasMore, let token = page.paginationToken else {
                if summary.gap == nil { summary.readThrough.insert(environment) }
                return summary
            }
            window.paginationToken = token
        }
    }

    /// The win-back entries of the subscriptions a first sync established, for the risk that
    /// exists at `now`, page by page over the table. Idempotent (an entry's key is its episode).
    func enqueueEstablished(_ environment: AppStoreEnvironment, now: Date, runId: Int64?) async throws -> Int {
        var after = "", created = 0
        while true {
            let items = try await store.feedEstablished(environment: environment, after: after, limit: settings.batchSize)
            guard let last = items.last else { return created }
            after = last.originalTransactionId
            created += try await store.winbackEnqueue(applier.establishedWinback(items, now: now), runId: runId, openedAt: now)
        }
    }

    private func flush(_ pending: inout [(payload: String, inboxId: Int64?)], environment: AppStoreEnvironment, establishOnly: Bool,
                       runId: Int64?, now: Date) async throws -> FeedSummary {
        guard !pending.isEmpty else { return FeedSummary() }
        let inputs = await verify(pending, source: .history, environment: environment)
        pending.removeAll(keepingCapacity: true)
        return try await applyInLanes(inputs, establishOnly: establishOnly, runId: runId, now: now)
    }
}
