import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnStore
import Dispatch
import Foundation
import Logging
import Polling
import Synchronization

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "The nightly run: plan what is due, poll Apple, write segments, events and win-back queues.",
        discussion: """
            A second `run` while one is in progress exits 0 with "another run is in progress: run N".
            A run in which every poll failed (at least 10, not counting ids Apple does not know) prints its summary and exits 69.
            An unfinished earlier run (crash, SIGTERM, time budget, Apple outage) is resumed, not restarted. Every night \
            (UTC day of --as-of) gets its own run: when the unfinished run is of an earlier night, tonight's is planned \
            at once, the earlier one is finished (and writes its segment_daily day), then tonight's is worked.
            SIGTERM or SIGINT stops claiming, finishes in-flight work, commits and exits 75 ("resumable: run N"); \
            a second signal exits at once.
            PostgreSQL going away mid-run: each claim and commit is retried for up to 2 minutes (2 to 3 minutes of outage \
            in all, polls first waiting for budget tokens up to APPSTORE_MAX_RETRY_WAIT), then exit 75.
            --join works the nightly run only (a backfill is joined with `backfill --join`). See docs/robustness.md.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var windows: WindowOptions
    @OptionGroup var apple: AppleOptions
    @OptionGroup var feedOptions: FeedOptions
    @OptionGroup var refundOptions: RefundOptions

    @OptionGroup var worker: WorkerOptions
    @OptionGroup var retention: RetentionOptions

    @Flag(name: .customLong("join"), help: "Work the run in progress alongside its owner (another process or host); no planning, no closing.")
    var join = false

    @Flag(name: .customLong("resume"), help: "Resume an unfinished run (the default behaviour; accepted for scripts).")
    var resume = false

    @Option(name: .customLong("metrics-file"), help: ArgumentHelp("Write Prometheus metrics here at the end (atomically), for node_exporter's textfile collector.", valueName: "path"))
    var metricsFile: String?

    @Option(name: .customLong("progress-interval"), parsing: .unconditional, help: ArgumentHelp("Without a terminal (or with --log-format json), log progress this often.", valueName: "duration"))
    var progressInterval = "10s"

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let logger = Logger(label: "churnwatch.run")
            let night = try await prepare(logger: logger)
            let stops = StopSwitch()
            let signals = SignalHandler { stops.stop(.signal) }
            defer { signals.cancel() }
            let budget = StopBudget(startedAt: Date(), maxDuration: night.options.maxDuration, grace: night.options.shutdownGrace)
            let nights = await AppNight.each(night.apps) { app, index in await self.work(app, index: index, night, stops: stops) }
            AppNight.print(nights)
            if let prune = night.prune, nights.allSatisfy({ if case .finished? = $0.outcome { true } else { false } }) {
                // A store of its own: the one opened before the night may have lost its connection
                // to a PostgreSQL restart the apps' engines rode out.
                await Self.prune(DatabaseStore.open(night.url, logger: logger), prune, asOf: night.options.asOf, logger: logger) {
                    stops.stopped || budget.usedUp(at: Date())
                }
            }
            if let file = night.metrics { file.write(nights.compactMap(\.metrics), logger: logger) }
            if let failure = AppNight.failure(of: nights) { throw failure }
        }
    }

    /// What every app's part of the night shares: the options and the apps with their
    /// configurations. Bad settings (the deployment's, or an `--app` not in the
    /// database) end the command here, before any work.
    func prepare(logger: Logger) async throws -> NightSetup {
        let url = try global.resolvedDatabaseURL()
        var options = RunOptions(asOf: try windows.resolvedAsOf())
        options.windows = try windows.resolvedWindows()
        try worker.apply(to: &options, join: join)
        let prune = try RetentionOptions.afterRun() && !join ? try retention.policy() : nil
        let refundPolicy = join ? nil : try refundOptions.validated()
        let interval = try parseDurationSetting("--progress-interval", progressInterval, positive: true)
        let metrics = try metricsFile.map(MetricsFile.init(path:))
        options.params = try StoredJSON(encoding: RunParams(options: options))
        let (_, apps) = try await NightSetup.App.load(url: url, apple: apple, selection: app,
                                                     feedOn: join ? false : try feedOptions.enabled(), logger: logger)
        return NightSetup(url: url, options: options, prune: prune, refundPolicy: refundPolicy, interval: interval, metrics: metrics,
                          apps: apps)
    }

    func report(_ outcome: RunOutcome, stats: WorkerStats, output: (String) -> Void) throws {
        try RunOutcomeReport.report(outcome, stats: stats, noun: "run", output: output)
    }

    /// The prune at the end of a night that finished (`CHURNWATCH_PRUNE=off` turns it off): one line,
    /// within what is left of the time budget. Its failure is logged and changes no exit code (the
    /// night's work is done; `churnwatch prune` goes on from where it stopped).
    static func prune(_ store: DatabaseStore, _ policy: RetentionPolicy, asOf: Date, logger: Logger,
                      shouldStop: @escaping @Sendable () -> Bool) async {
        do {
            let report = try await store.prune(policy, asOf: asOf, now: Date(), dryRun: false, shouldStop: shouldStop)
            print(PruneText.line(report, dryRun: false))
        } catch {
            logger.warning("prune after the run failed; the run is done (run `churnwatch prune` to go on)", metadata: ["error": "\(classify(error).0)"])
        }
    }
}

private struct RunParams: Encodable {
    var start_window: Double, end_window: Double, lapsed_window: Double, stale_after: Double, feed_stale_after: Double
    var concurrency: Int, batch_size: Int
    init(options: RunOptions) {
        start_window = options.windows.start
        end_window = options.windows.end
        lapsed_window = options.windows.lapsed
        stale_after = options.windows.staleAfter
        feed_stale_after = options.windows.feedStaleAfter
        concurrency = options.concurrency
        batch_size = options.batchSize
    }
}

enum RunSummaryText {
    static func lines(_ s: RunSummary, calls: [String: Int]) -> [String] {
        func list(_ d: [String: Int]) -> String {
            d.isEmpty ? "none" : d.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        var out = ["run \(s.runId) done: \(s.due) due, \(s.polled) polled, \(s.failed) failed" + (s.failed > 0 ? " (\(list(s.failedByReason)))" : "")]
        out.append("events: \(s.events)" + (s.events > 0 ? " (\(list(s.eventsByType)))" : ""))
        out.append("win-back: \(s.enqueued) created" + (s.enqueued > 0 ? " (\(list(s.enqueuedByCampaign)))" : "") + ", \(s.obsoleted) obsolete, \(s.expired) expired")
        if s.quarantined > 0 { out.append("quarantined payloads: \(s.quarantined)") }
        out.append("Apple calls by this process: \(list(calls))")
        return out
    }
}

/// SIGTERM/SIGINT: the first asks for a graceful stop, the second exits at once (75).
final class SignalHandler: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let count = Mutex(0)

    /// - Parameter stopping: false when the stop began already (serve's group took the first
    /// signal): the next one exits at once.
    init(stopping: Bool = true, _ onFirst: @escaping @Sendable () -> Void) {
        if !stopping { count.withLock { $0 = 1 } }
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [weak self] in
                guard let self else { return }
                let n = self.count.withLock { count in
                    count += 1
                    return count
                }
                if n == 1 {
                    FileHandle.standardError.write(Data("churnwatch: stopping: finishing in-flight work (signal again to exit at once)\n".utf8))
                    onFirst()
                } else {
                    FileHandle.standardError.write(Data("churnwatch: exiting at once; committed work is kept, re-run to resume\n".utf8))
                    exit(ExitStatus.resumable)
                }
            }
            source.resume()
            sources.append(source)
        }
    }

    func cancel() {
        for s in sources { s.cancel() }
    }
}

/// What `run` and `backfill` print, or the one-line error and exit code, for how a run ended.
enum RunOutcomeReport {
    /// A finished run with no successful poll and at least this many failures other than
    /// "not found" and "bad request" exits 69.
    static let everyPollFailedMinimum = 10

    /// - Parameter noun: "run" or "backfill", as the operator called it.
    static func report(_ outcome: RunOutcome, stats: WorkerStats, noun: String, output: (String) -> Void = { print($0) }) throws {
        switch outcome {
        case .finished(let s):
            output(RunSummaryText.lines(s, calls: stats.calls).joined(separator: "\n"))
            // Nothing usable came back: a wrong server or one answering garbage. Not a success
            // (0) and not a stop to resume (75, which the systemd unit counts as success). Ids
            // Apple answered it does not know, and a re-run that only retries a few bad items,
            // are not that.
            let unusable = s.failedByClass.reduce(0) { sum, failed in
                switch failed.key {
                case .notFound, .badRequest: sum
                default: sum + failed.value
                }
            }
            if s.polled == 0, unusable >= RunOutcomeReport.everyPollFailedMinimum {
                let reasons = s.failedByReason.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                throw CLIError.unavailable("every poll of run \(s.runId) failed (\(reasons)): check APPSTORE_BASE_URL and one subscription with `churnwatch inspect --otid ID`; the next run polls them again")
            }
        case .joinedAndDrained(let runId, let polled):
            output("joined \(noun == "run" ? "run" : "\(noun) run") \(runId): polled \(polled); no work left")
        case .anotherRunInProgress(let runId):
            // Without an id the other process holds the lock but has not committed its plan yet.
            output("another \(noun) is in progress: " + (runId.map { "run \($0)" } ?? "its process is still planning it"))
        case .nothingToJoin:
            output("no \(noun) in progress to join")
        case .nightDone(let runId):
            output("run \(runId) finished tonight's night already: nothing to do (`churnwatch status \(runId)` shows it; a later --as-of plans the next night)")
        case .nothingToResume:
            output("no unfinished \(noun) to resume")
        case .otherBackfillUnfinished(let runId, let cohort):
            throw CLIError.resumable("backfill run \(runId) (\(cohort)) is unfinished; one backfill at a time: finish it with `churnwatch backfill --resume`, then start this one")
        case .stopped(let runId, let stop):
            throw CLIError(description: message(stop, runId: runId), exitCode: stop.exitStatus)
        }
    }

    /// The one line a stopped run ends with.
    static func message(_ stop: RunStop, runId: Int64?) -> String {
        guard let runId else {
            if case .keyRefused = stop {
                return "Apple rejected the API key: check issuer id, key id and key (the change feed's sync stopped before planning; the next run resumes it)"
            }
            return "resumable: stopped before planning (\(stop.reason)); the next run resumes the sync from its cursor"
        }
        return switch stop {
        case .signal, .timeBudget, .internalError: "resumable: run \(runId) (stopped: \(stop.reason))"
        case .appleUnavailable(let detail, _): "resumable: run \(runId) (Apple unavailable: \(detail))"
        case .database(let detail): "resumable: run \(runId) (PostgreSQL unavailable: \(detail))"
        case .keyRefused: "Apple rejected the API key: check issuer id, key id and key (run \(runId) is resumable)"
        case .untrustedServer(let detail): "\(detail) (run \(runId) is resumable)"
        }
    }
}
