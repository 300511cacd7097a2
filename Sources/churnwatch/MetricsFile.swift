import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Polling

/// What one `churnwatch run` publishes for Prometheus (node_exporter's textfile collector):
/// the figures, and their text exposition format (version 0.0.4).
struct RunMetrics: Sendable, Equatable {
    /// The app these figures are of: every sample's `bundle_id` label.
    var bundleId = ""
    /// When a run last finished (every item done or failed); nil when none is known (the
    /// family is then left out: alert on its absence).
    var lastSuccess: Date?
    /// Wall-clock seconds this process worked the run (planning and closing included).
    var duration: TimeInterval
    /// The process's exit code (0, 75, 78, 69 or 1).
    var exitCode: Int32
    /// The run this process worked; nil when it never got one (an error before planning).
    var runId: Int64?
    /// Apple calls this process made, by endpoint (`status`, `history`, `receipt`, ...).
    var calls: [String: Int]
    /// Figures from the database; nil when they could not be read (the process still reports
    /// its exit code and duration).
    var figures: RunMetricsFigures?
    /// The change feed as stored after the run, and what this process's sync did (nil: the
    /// feed is off, or could not be read).
    var feed: FeedStatus?
    var feedSync: FeedSummary?
    /// Each history the feed reads (Production's, and Sandbox's in a Production deployment):
    /// whether its first sync is read through (false: its subscriptions are not planned).
    var feedFirstSyncDone: [AppStoreEnvironment: Bool] = [:]
    /// The moment the feed's cursor age is measured at (the run's as-of).
    var asOf = Date(timeIntervalSince1970: 0)
    /// Refund requests Apple signed in the 24 hours before `asOf` (nil: the feed is off).
    var refunds: RefundSummary?

    /// Endpoints always published, zero or not, so rates and alerts see a series from the start.
    static let endpoints = ["status", "history", "receipt"]

    /// The exposition of one app's figures: one HELP and one TYPE line per family, then its samples.
    var exposition: String { Self.exposition([self]) }

    /// Several apps' figures in one exposition: each family once, its samples app by app.
    static func exposition(_ apps: [RunMetrics]) -> String {
        var out = Exposition()
        for app in apps {
            out.labels = [("bundle_id", app.bundleId)]
            app.append(to: &out)
        }
        return out.text
    }

    func append(to out: inout Exposition) {
        if let lastSuccess {
            out.family("churnwatch_last_success_timestamp_seconds", .gauge,
                       "Unix time at which a churnwatch run last finished (every item done or failed).")
            out.sample("churnwatch_last_success_timestamp_seconds", [], lastSuccess.timeIntervalSince1970)
        }

        out.family("churnwatch_run_duration_seconds", .gauge, "Wall-clock seconds the last churnwatch run took in this process.")
        out.sample("churnwatch_run_duration_seconds", [], duration)

        out.family("churnwatch_run_exit_code", .gauge, "Exit code of the last churnwatch run (0 done, 75 resumable, 78 configuration, 69 unavailable, 1 bug).")
        out.sample("churnwatch_run_exit_code", [], Double(exitCode))

        if let runId {
            out.family("churnwatch_run_id", .gauge, "Id of the run in churnwatch.runs (see churnwatch status RUN).")
            out.sample("churnwatch_run_id", [], Double(runId))
        }

        if let items = figures?.items {
            out.family("churnwatch_run_items", .gauge, "Items of the last run by outcome (every worker's); pending counts items not finished yet.")
            out.sample("churnwatch_run_items", [("outcome", "done")], Double(items.done))
            out.sample("churnwatch_run_items", [("outcome", "failed")], Double(items.failed))
            out.sample("churnwatch_run_items", [("outcome", "pending")], Double(items.pending + items.claimed))
        }

        out.family("churnwatch_api_calls_total", .counter, "App Store Server API calls this process made during the last run, by endpoint.")
        for endpoint in Self.endpoints + calls.keys.filter({ !Self.endpoints.contains($0) }).sorted() {
            out.sample("churnwatch_api_calls_total", [("endpoint", endpoint)], Double(calls[endpoint] ?? 0))
        }

        if let events = figures?.eventsByType {
            out.family("churnwatch_events_total", .counter, "Churn events the last run wrote (churnwatch.churn_events), by event.")
            let known = ChurnEventType.allCases.map(\.rawValue)
            for event in known + events.keys.filter({ !known.contains($0) }).sorted() {
                out.sample("churnwatch_events_total", [("event", event)], Double(events[event] ?? 0))
            }
        }

        if let figures {
            out.family("churnwatch_segment_subscriptions", .gauge, "Subscriptions in each churn-risk segment now (churnwatch.subscription_segments).")
            let known = Segment.allCases.map(\.rawValue)
            for segment in known + figures.segments.keys.filter({ !known.contains($0) }).sorted() {
                out.sample("churnwatch_segment_subscriptions", [("segment", segment)], Double(figures.segments[segment] ?? 0))
            }

            out.family("churnwatch_winback_queue_depth", .gauge, "Live win-back entries (churnwatch.winback_queue) by campaign and status.")
            let campaigns = WinbackCampaign.allCases.map(\.rawValue)
            for campaign in campaigns + figures.winbackDepth.keys.filter({ !campaigns.contains($0) }).sorted() {
                for status in ["pending", "claimed"] {
                    out.sample("churnwatch_winback_queue_depth", [("campaign", campaign), ("status", status)],
                               Double(figures.winbackDepth[campaign]?[status] ?? 0))
                }
            }
        }
        if let feed { feedSamples(feed, into: &out) }
        if let refunds { refundSamples(refunds, into: &out) }
    }

    /// Alert on `outcome="expired"` or `"failed"` above 0: a consented customer may have gone unanswered.
    private func refundSamples(_ r: RefundSummary, into out: inout Exposition) {
        out.family("churnwatch_refund_requests_24h", .gauge,
                   "Apple's refund requests signed in the 24 hours before the run's as-of, by what became of them.")
        let expired = r.byBranch.first { $0.branch == RefundBranch.expired.rawValue }?.requests ?? 0
        for (outcome, n) in [("answered", r.answeredInTime), ("not_sent", r.notSent - expired), ("expired", expired), ("failed", r.failed),
                             ("open", r.open)] {
            out.sample("churnwatch_refund_requests_24h", [("outcome", outcome)], Double(n))
        }
    }

    private func feedSamples(_ feed: FeedStatus, into out: inout Exposition) {
        if let until = feed.state.cursor.syncedUntil {
            out.family("churnwatch_feed_cursor_age_seconds", .gauge, "Seconds between the run's as-of and the end of the notification history read so far.")
            out.sample("churnwatch_feed_cursor_age_seconds", [], max(0, asOf.timeIntervalSince1970 - Double(until) / 1000))
        }
        out.family("churnwatch_feed_records_total", .counter, "Notification history records read by every sync of this database.")
        out.sample("churnwatch_feed_records_total", [], Double(feed.state.recordsTotal))
        if let sync = feedSync {
            out.family("churnwatch_feed_synced", .gauge, "Notifications this run's sync read (history and inbox), by outcome.")
            for (outcome, n) in [("applied", sync.applied), ("duplicate", sync.duplicates), ("stale", sync.stale),
                                 ("quarantined", sync.quarantined), ("ignored", sync.ignored)] {
                out.sample("churnwatch_feed_synced", [("outcome", outcome)], Double(n))
            }
        }
        out.family("churnwatch_feed_inbox_pending", .gauge, "Rows of churnwatch.notification_inbox not processed yet.")
        out.sample("churnwatch_feed_inbox_pending", [], Double(feed.inboxPending))
        historySamples(into: &out)
    }

    /// Alert on `churnwatch_feed_history_read_through{environment="Sandbox"}` at 0 for days: the
    /// Sandbox history fails while Production's nights go on (its subscriptions by the windows,
    /// or not planned while its first sync is pending).
    private func historySamples(into out: inout Exposition) {
        let environments = feedFirstSyncDone.keys.sorted { $0.rawValue < $1.rawValue }
        guard !environments.isEmpty else { return }
        if let sync = feedSync {
            out.family("churnwatch_feed_history_read_through", .gauge,
                       "1 when this run's sync read the environment's notification history through, 0 when Apple failed it.")
            for environment in environments {
                out.sample("churnwatch_feed_history_read_through", [("environment", environment.rawValue)],
                           sync.readThrough.contains(environment) ? 1 : 0)
            }
        }
        out.family("churnwatch_feed_first_sync_pending", .gauge,
                   "1 while the environment's first sync is not read through: its subscriptions are not planned.")
        for environment in environments {
            out.sample("churnwatch_feed_first_sync_pending", [("environment", environment.rawValue)],
                       feedFirstSyncDone[environment] == true ? 0 : 1)
        }
    }

    typealias Exposition = PrometheusText
}

/// The `--metrics-file` of `churnwatch run`: replaced atomically (a temporary file in the same
/// directory, then rename), so node_exporter never reads half a file.
struct MetricsFile: Sendable {
    let path: String

    /// Checks, before any work, that the file can be written: its directory exists and is
    /// writable, and the path is not a directory. One line naming the flag otherwise (exit 78).
    init(path: String) throws {
        guard !path.isEmpty else { throw CLIError.configuration("--metrics-file: the path is empty") }
        let url = URL(fileURLWithPath: path)
        let dir = url.deletingLastPathComponent().path
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            throw CLIError.configuration("--metrics-file \(path): directory \(dir) does not exist")
        }
        guard access(dir, W_OK) == 0 else {
            throw CLIError.configuration("--metrics-file \(path): directory \(dir) is not writable")
        }
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir), isDir.boolValue {
            throw CLIError.configuration("--metrics-file \(path) is a directory")
        }
        self.path = url.path
    }

    /// The last success time of `app` in the current file, if it has one (a file from before
    /// apps were labelled has it unlabelled: that is the deployment's single app).
    func previousLastSuccess(app: String) -> Date? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let name = "churnwatch_last_success_timestamp_seconds"
        let labelled = "\(name){bundle_id=\"\(RunMetrics.Exposition.escapeLabelValue(app))\"} "
        let lines = text.split(separator: "\n")
        for prefix in [labelled, name + " "] {
            for line in lines where line.hasPrefix(prefix) {
                if let seconds = Double(line.dropFirst(prefix.count).split(separator: " ").first ?? ""), seconds.isFinite {
                    return Date(timeIntervalSince1970: seconds)
                }
            }
        }
        return nil
    }

    /// Writes `text` to a temporary file next to the target (a name node_exporter ignores:
    /// it reads only `*.prom`), flushes it to disk, and renames it over the target.
    /// A target that exists and is not a regular file (a device, a pipe, a symlink) is written
    /// into directly, never replaced.
    func write(_ text: String) throws {
        let url = URL(fileURLWithPath: path)
        let direct = !isReplaceable(path)
        let temp = direct ? path : url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw MetricsFileError(path: temp, operation: "create", errno: errno) }
        var ok = false
        defer { if !ok && !direct { unlink(temp) } }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                close(fd)
                throw MetricsFileError(path: temp, operation: "write", errno: e)
            }
            written += n
        }
        if direct {
            close(fd)
            ok = true
            return
        }
        if fsync(fd) != 0 {
            let e = errno
            close(fd)
            throw MetricsFileError(path: temp, operation: "fsync", errno: e)
        }
        close(fd)
        guard rename(temp, path) == 0 else { throw MetricsFileError(path: path, operation: "rename", errno: errno) }
        ok = true
    }
}

extension MetricsFile {
    /// One app's metrics after its part of a run; nil when its process worked no run (another
    /// one in progress, nothing to join). The last success time moves only when the run
    /// finished; otherwise the file's previous value is kept. Database figures that cannot be
    /// read are left out (logged), never a failure.
    func gather(outcome: RunOutcome?, runId: Int64?, exitCode: Int32, now: Date, duration: TimeInterval, stats: WorkerStats,
                store: ChurnStore, feed: (environment: AppStoreEnvironment, sync: FeedSummary?, asOf: Date)?,
                logger: Logger) async -> RunMetrics? {
        switch outcome {
        case .anotherRunInProgress?, .nothingToJoin?, .nothingToResume?, .otherBackfillUnfinished?: return nil
        default: break
        }
        var metrics = RunMetrics(duration: duration, exitCode: exitCode, runId: runId, calls: stats.calls)
        metrics.bundleId = store.app
        if case .finished? = outcome { metrics.lastSuccess = now } else { metrics.lastSuccess = previousLastSuccess(app: store.app) }
        do {
            metrics.figures = try await store.metricsFigures(runId: runId)
        } catch {
            logger.warning("metrics without database figures", metadata: ["error": "\(classify(error).0)"])
        }
        if let feed {
            metrics.feed = try? await store.feedStatus(environment: feed.environment, asOf: feed.asOf)
            metrics.feedSync = feed.sync
            for environment in feed.environment == .production ? [.production, .sandbox] : [feed.environment] {
                metrics.feedFirstSyncDone[environment] = try? await store.feedStateRead(environment: environment).cursor.syncedUntil != nil
            }
            metrics.asOf = feed.asOf
            metrics.refunds = try? await store.refundSummary(since: feed.asOf.addingTimeInterval(-86_400), until: feed.asOf)
        }
        return metrics
    }

    /// Writes the apps' metrics in one file. No app worked a run: the file is left as it is.
    /// A failure to write is logged and never changes the exit code.
    func write(_ apps: [RunMetrics], logger: Logger) {
        guard !apps.isEmpty else {
            logger.info("metrics file left as it is: this process worked no run", metadata: ["path": "\(path)"])
            return
        }
        do {
            try write(RunMetrics.exposition(apps))
        } catch {
            logger.error("cannot write the metrics file", metadata: ["error": "\(error)"])
        }
    }
}

extension RunOutcome {
    /// The run this outcome is about; nil when there was none.
    var runId: Int64? {
        switch self {
        case .finished(let s): return s.runId
        case .joinedAndDrained(let id, _), .otherBackfillUnfinished(let id, _): return id
        case .stopped(let id, _): return id
        case .anotherRunInProgress(let id): return id
        case .nightDone(let id): return id
        case .nothingToJoin, .nothingToResume: return nil
        }
    }

    /// A short name for logs: finished, interrupted, ...
    var label: String {
        switch self {
        case .finished: return "finished"
        case .joinedAndDrained: return "joined_and_drained"
        case .anotherRunInProgress: return "another_run_in_progress"
        case .nothingToJoin: return "nothing_to_join"
        case .nightDone: return "night_done"
        case .stopped(_, let stop): return stop.label
        case .nothingToResume: return "nothing_to_resume"
        case .otherBackfillUnfinished: return "other_backfill_unfinished"
        }
    }
}

struct MetricsFileError: Error, CustomStringConvertible {
    var path: String
    var operation: String
    var errno: Int32
    var description: String { "cannot \(operation) \(path): \(String(cString: strerror(errno)))" }
}
