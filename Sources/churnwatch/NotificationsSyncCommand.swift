import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Polling

struct NotificationsSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync Apple's notification history since the stored cursor, and the inbox, alone (cron every few minutes gives same-hour save offers).",
        discussion: """
            Safe beside a nightly run and repeatable: notifications are deduplicated on their notificationUUID, and a \
            sync cut short resumes from its last stored page. Another sync in progress: exits 0 saying so.
            Apple not answering (outage, rate limit past the wait budget): the cursor stays, exit 75.
            Apple refusing the key: exit 78; a server that is not trusted: exit 69. See docs/contracts.md "Change feed".
            Then answers the refund requests read so far (CONSUMPTION_REQUEST, within Apple's 12 hours) for customers \
            with consent: see docs/contracts.md "Refund requests".
            Every app (or those named with --app) syncs its own history at once; with several, an app that could not \
            finish makes the exit 75 (78 when its settings are wrong) and the others' work is kept.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @OptionGroup var feedOptions: FeedOptions
    @OptionGroup var refundOptions: RefundOptions

    @Option(name: .customLong("as-of"), help: ArgumentHelp("Read the history up to this moment, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    @Option(name: .customLong("max-duration"), parsing: .unconditional, help: ArgumentHelp("Stop after this long (between pages; what was read is kept) and exit 75; the next sync resumes.", valueName: "duration"))
    var maxDuration: String?

    @Option(name: .customLong("shutdown-grace"), parsing: .unconditional, help: ArgumentHelp("After SIGTERM/SIGINT or --max-duration, how long a page in flight may take before it is abandoned.", valueName: "duration"))
    var shutdownGrace = "30s"

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let logger = Logger(label: "churnwatch.notifications")
            let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let stop = FeedStopSwitch(budget: try maxDuration.map { try parseDurationSetting("--max-duration", $0, positive: true) },
                                      grace: try parseDurationSetting("--shutdown-grace", shutdownGrace))
            let signals = SignalHandler { stop.request(.signal) }
            defer { signals.cancel() }
            let refundPolicy = try refundOptions.validated()
            let url = try global.resolvedDatabaseURL()
            let (_, apps) = try await NightSetup.App.load(url: url, apple: apple, selection: app, feedOn: true, logger: logger)
            let syncs = await AppNight.each(apps) { app, index in
                var appLogger = logger
                if apps.count > 1 { appLogger[metadataKey: "bundle_id"] = "\(app.record.bundleId)" }
                return await self.sync(app, index: index, url: url, at: at, stop: stop, refundPolicy: refundPolicy, logger: appLogger)
            }
            AppNight.print(syncs)
            if let failure = AppNight.failure(of: syncs) { throw failure }
        }
    }

    /// One app's sync and refund answers; what it prints in `lines`, its ending in `failure`.
    func sync(_ app: NightSetup.App, index: Int, url: String, at: Date, stop: FeedStopSwitch, refundPolicy: RefundAnswerPolicy?,
              logger: Logger) async -> AppNight {
        var out = AppNight(app: app.record.bundleId, index: index)
        guard case .success(let config) = app.configuration else {
            out.failure = RunCommand.failure(app.configuration)
            out.configured = false
            return out
        }
        guard app.feed else {
            out.lines.append("notifications sync: the change feed is off for this app (churnwatch apps set \(out.app) --notifications on)")
            return out
        }
        do {
            let context = try await FeedContext.open(url: url, config: config, options: feedOptions, asOf: at, logger: logger)
            let answerer = RefundOptions.answerer(refundPolicy, client: context.client, store: context.store, logger: logger)
            let locks = context.store.runLocksOpen(logger: logger)
            guard try await locks.take(context.store.feedLockKey, name: "feed") else {
                await locks.close()
                out.lines.append("another process is syncing the change feed: nothing to do")
                return out
            }
            let summary: FeedSummary
            do {
                summary = try await context.feed.sync(now: at, control: stop.control)
                await locks.close()
            } catch {
                await locks.close()
                throw error
            }
            out.lines.append(FeedSummaryText.line(summary, what: "notifications sync"))
            if let sandbox = summary.sandboxFailure {
                // Not a failure of this sync: Production's history is read (docs/contracts.md, exit codes).
                logger.warning("the Sandbox history is unavailable: Production's is read; the next sync retries Sandbox's from its cursor",
                               metadata: ["error": "\(sandbox.detail)"])
            }
            if let answerer {
                // Requests read after their deadline are past it (recorded so on reading), and
                // counted whether or not the pass below runs.
                var refunds = RefundAnswerSummary()
                if summary.stop?.isAskedFor != true {
                    // Deadlines are judged by the sync's moment moving on with the clock.
                    let started = ContinuousClock.now
                    refunds = try await answerer.answerOpen(
                        now: { at.addingTimeInterval((ContinuousClock.now - started) / .seconds(1)) },
                        shouldStop: { stop.control.reason() })
                }
                refunds.expired += summary.lateRefundRequests
                if !refunds.isEmpty { out.lines.append(RefundAnswerText.line(refunds)) }
            }
            if let stop = summary.stop, stop.isAskedFor {
                throw CLIError.resumable("the notification history sync stopped: \(stop.reason); what it read is kept (re-run to resume)")
            }
            if let failure = summary.stop {
                throw CLIError(description: "the notification history stopped early: \(failure.detail) (re-run to resume)", exitCode: failure.exitStatus)
            }
        } catch {
            let (line, code) = classify(error)
            out.failure = CLIError(description: line, exitCode: code)
        }
        return out
    }
}
