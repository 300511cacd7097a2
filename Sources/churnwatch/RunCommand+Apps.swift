import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Polling
import Synchronization

/// What every app's part of a `run` shares (``RunCommand/prepare(logger:)``).
struct NightSetup: Sendable {
    struct App: Sendable {
        var record: AppRecord
        /// The change feed on for this app (its own setting, else the deployment's).
        var feed: Bool
        /// Its configuration, or the one line saying what is wrong with it.
        var configuration: Result<AppStoreConfiguration, any Error>
    }

    var url: String
    var options: RunOptions
    var prune: RetentionPolicy?
    var refundPolicy: RefundAnswerPolicy?
    var interval: TimeInterval
    var metrics: MetricsFile?
    var apps: [App]
}

extension NightSetup.App {
    /// The apps a command that polls works on (`--app`, else every app in `churnwatch.apps`), each
    /// with its configuration, and the deployment's store (after its schema check; the
    /// deployment's app marked the default). The deployment's settings are checked first: a bad
    /// one ends the command in one line, as before apps were kept.
    static func load(url: String, apple: AppleOptions, selection: AppOptions, feedOn: Bool, logger: Logger,
                     connections: Int = 1) async throws -> (store: DatabaseStore, apps: [NightSetup.App]) {
        let deployment = try apple.configuration(logger: logger)
        let store = DatabaseStore.open(url, connections: connections, logger: logger)
        try await store.schemaCheck(migrations: BuildMigrations.names())
        try await store.appsMarkDefault(deployment.bundleId)
        return (store, try await read(store, apple: apple, selection: selection, feedOn: feedOn, deployment: deployment.bundleId,
                                      logger: logger))
    }

    /// The apps of `store` as ``load`` gives them, read only (`serve` reads them again when a
    /// notification names an app it does not know: nothing a request causes may write).
    static func read(_ store: DatabaseStore, apple: AppleOptions, selection: AppOptions, feedOn: Bool, deployment: String,
                     logger: Logger) async throws -> [NightSetup.App] {
        let all = try await store.appsList()
        return try selection.selected(from: all).map { record in
            NightSetup.App(record: record, feed: record.notifications ?? feedOn, configuration: Result {
                try apple.configuration(for: record, deploymentApp: deployment, logger: logger)
            })
        }
    }
}

/// One app's part of a `run`: the lines it prints, how it ended, its metrics.
struct AppNight: Sendable {
    var app: String
    var index: Int
    var lines: [String] = []
    /// The one line and exit code it ended with; nil when it ended well.
    var failure: CLIError?
    var outcome: RunOutcome?
    var metrics: RunMetrics?
    /// False when the app could not start for its settings (its configuration, its key).
    var configured = true

    /// How the command ends. One app: as that app's night. Several: well when every app's did;
    /// 1 when one hit a bug; 78 when one could not start for its settings; otherwise 75: the run
    /// was partial, and the next run resumes what each unfinished app left.
    static func failure(of nights: [AppNight]) -> CLIError? {
        if nights.count == 1 { return nights[0].failure }
        let failed = nights.filter { $0.failure != nil }
        guard !failed.isEmpty else { return nil }
        let names = failed.map { "\($0.app) (exit \($0.failure?.exitCode ?? 0))" }.joined(separator: ", ")
        let what = "\(failed.count) of \(nights.count) apps did not finish: \(names)"
        if failed.contains(where: { $0.failure?.exitCode == ExitStatus.bug }) {
            return CLIError(description: what, exitCode: ExitStatus.bug)
        }
        if failed.contains(where: { !$0.configured }) {
            return CLIError.configuration(what + "; fix the settings named above")
        }
        return CLIError.resumable("resumable: " + what + "; the next run resumes them")
    }
}

extension AppNight {
    /// `work` for every app at once; the results in the apps' order.
    static func each(_ apps: [NightSetup.App], _ work: @escaping @Sendable (NightSetup.App, Int) async -> AppNight) async -> [AppNight] {
        await withTaskGroup(of: AppNight.self) { group in
            for (index, app) in apps.enumerated() {
                group.addTask { await work(app, index) }
            }
            return await group.reduce(into: []) { $0.append($1) }.sorted { $0.index < $1.index }
        }
    }

    /// Each app's lines on stdout, as one app alone would print them; with several, each under
    /// a line naming its app, and its failure on stderr (the command's last line counts them).
    static func print(_ nights: [AppNight]) {
        let several = nights.count > 1
        for n in nights {
            if several { Swift.print("app \(n.app):") }
            if !n.lines.isEmpty { Swift.print(n.lines.joined(separator: "\n")) }
            if several, let failure = n.failure {
                // An app's own settings' line names the app already.
                let named = failure.description.hasPrefix("app \(n.app): ") ? failure.description : "app \(n.app): \(failure.description)"
                FileHandle.standardError.write(Data("churnwatch: \(named)\n".utf8))
            }
        }
    }
}

/// Stops every app's engine at the first signal, including engines started after it.
final class StopSwitch: Sendable {
    private let state = Mutex<(reason: RunStop?, engines: [RunEngine])>((nil, []))

    func register(_ engine: RunEngine) {
        let reason = state.withLock { s -> RunStop? in
            s.engines.append(engine)
            return s.reason
        }
        if let reason { engine.requestStop(reason) }
    }

    func stop(_ reason: RunStop) {
        let engines = state.withLock { s -> [RunEngine] in
            s.reason = s.reason ?? reason
            return s.engines
        }
        for engine in engines { engine.requestStop(reason) }
    }

    var stopped: Bool { state.withLock { $0.reason != nil } }
}

extension RunCommand {
    /// One app's night: its engine over its own store scope, Apple client and budget; what it
    /// would have printed on its own is kept in `lines`, its ending in `failure`.
    func work(_ app: NightSetup.App, index: Int, _ setup: NightSetup, stops: StopSwitch) async -> AppNight {
        var night = AppNight(app: app.record.bundleId, index: index)
        var logger = Logger(label: "churnwatch.run")
        if setup.apps.count > 1 { logger[metadataKey: "bundle_id"] = "\(app.record.bundleId)" }
        var engine: RunEngine?
        var store: ChurnStore?
        var progress: ProgressReporter?
        guard case .success(let config) = app.configuration else {
            night.failure = Self.failure(app.configuration)
            night.configured = false
            return night
        }
        var feedOn = false
        let started = Date()
        do {
            let parts = try await EngineParts.open(url: setup.url, options: setup.options, config: config, logger: logger)
            var options = setup.options
            // A worker is one app's engine: its advisory lock tells whether that engine lives.
            if setup.apps.count > 1 { options.workerName += "/" + app.record.bundleId }
            if !join {
                options.feed = try feedOptions.feed(on: app.feed, client: parts.client, store: parts.store, logger: logger)
                let answerer = RefundOptions.answerer(setup.refundPolicy, client: parts.client, store: parts.store, logger: logger)
                options.refunds = options.feed == nil ? nil : answerer
                feedOn = options.feed != nil
            }
            let working = parts.engine(options: options, fullHistory: false, logger: logger)
            (engine, store) = (working, parts.store)
            stops.register(working)
            let terminal = setup.apps.count == 1 && isatty(STDERR_FILENO) == 1 && global.logFormat != .json
            let reporter = ProgressReporter(mode: terminal ? .terminal : .log, interval: setup.interval, store: parts.store,
                                            clock: working.clock, logger: logger)
            progress = reporter
            reporter.start()
            let ended = try await Self.ran(working, parts: parts, progress: reporter)
            night.outcome = ended
            reporter.finish()
            night.lines += Self.feedLines(working)
            try report(ended, stats: working.stats) { night.lines.append($0) }
        } catch {
            progress?.finish()
            let (line, code) = classify(error)
            night.failure = CLIError(description: line, exitCode: code)
        }
        let exitCode = night.failure?.exitCode ?? ExitStatus.ok
        if let engine, let store {
            progress?.summary(outcome: night.outcome?.label ?? "error", exitCode: exitCode, stats: engine.stats)
            if let file = setup.metrics {
                let feed = feedOn ? (config.environment, engine.feedSummary, setup.options.asOf) : nil
                night.metrics = await file.gather(outcome: night.outcome, runId: night.outcome?.runId ?? progress?.runId, exitCode: exitCode,
                                                  now: engine.clock.now(), duration: Date().timeIntervalSince(started), stats: engine.stats,
                                                  store: store, feed: feed, logger: logger)
            }
        }
        return night
    }

    /// The one line of a configuration that could not be made.
    static func failure(_ configuration: Result<AppStoreConfiguration, any Error>) -> CLIError? {
        guard case .failure(let error) = configuration else { return nil }
        let (line, code) = classify(error)
        return CLIError(description: line, exitCode: code)
    }

    /// Works the engine; a run Apple's 429s stopped says the rate they brought the shared budget down to.
    static func ran(_ engine: RunEngine, parts: EngineParts, progress: ProgressReporter) async throws -> RunOutcome {
        var ended = try await engine.run { progress.record($0) }
        if case .stopped(let runId, .appleUnavailable(let detail, rateLimited: true)) = ended,
           let rate = await parts.limiter.allowedRate(RateLimitKey(.subscriptionStatuses, parts.client.configuration.environment)) {
            ended = .stopped(runId: runId, .appleUnavailable(detail + String(format: "; the status rate had come down to %.1f/s", rate),
                                                             rateLimited: true))
        }
        return ended
    }

    /// The feed's and the refund answers' lines, and the runs of earlier nights this invocation closed.
    static func feedLines(_ engine: RunEngine) -> [String] {
        var lines: [String] = []
        if let feed = engine.feedSummary { lines.append(FeedSummaryText.line(feed, what: "change feed")) }
        if let refunds = engine.refundSummary, !refunds.isEmpty { lines.append(RefundAnswerText.line(refunds)) }
        for earlier in engine.closedEarlier {
            lines.append(RunSummaryText.lines(earlier, calls: [:]).dropLast().joined(separator: "\n"))
        }
        return lines
    }
}
