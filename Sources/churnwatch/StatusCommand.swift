import AppStoreServerAPI
import ArgumentParser
import ChurnStore
import Foundation

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the progress of the current run, a given run, or the latest one.",
        discussion: """
            Without RUN: the unfinished run being worked, else the newest unfinished run, else the newest run. \
            Shows items finished of total, \
            failures by reason, Apple calls by endpoint and their rate, 429s, workers, and an ETA. \
            Rates are over the time workers were at work (an interrupted run's pause does not count).

            Several apps (every app in churnwatch.apps, or those given with --app): one block per app after a line \
            "app BUNDLE_ID". RUN is shown whatever its app (run ids are global). --json: one object with the first \
            app's fields (the default app's, or RUN's app's) and its bundle_id, and "apps": one such object per app.

            Exit codes: 0 (also when there is no run yet: one line says so); 65 RUN does not exist; \
            78 a bad value; 69 database unreachable.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    @Argument(help: "A run id (default: the current run, else the latest).")
    var run: String?

    @Flag(name: .customLong("json"), help: "Print one JSON object instead of text.")
    var json = false

    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment to measure elapsed time and ETA at, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    /// EX_DATAERR: the run asked for does not exist.
    static let unknownRun: Int32 = 65

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let runId = try run.map { text -> Int64 in
                guard let id = Int64(text), id > 0 else { throw CLIError.configuration("run \"\(text)\" is not a run id (a positive integer)") }
                return id
            }
            let now = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let stores = try await app.readingStores(global)
            guard let database = stores.first?.database else { throw AppOptions.noAppsYet }
            let environments = Dictionary(try await database.appsList().map { ($0.bundleId, $0.environment) }) { first, _ in first }
            func environment(_ store: ChurnStore) -> AppStoreEnvironment {
                environments[store.app].flatMap { $0 }.flatMap(AppStoreEnvironment.init(registered:)) ?? FeedStatusText.environment()
            }
            func feed(_ store: ChurnStore) async throws -> FeedStatus {
                try await store.feedStatus(environment: environment(store), asOf: now)
            }
            func sandbox(_ store: ChurnStore) async throws -> FeedState? {
                environment(store) == .production ? try await store.feedStateRead(environment: .sandbox) : nil
            }
            var shown: [AppStatus] = []
            if let runId {
                // Run ids are global: run N is shown whatever its app, with its app's feed.
                guard let owner = try await database.runApp(runId), let status = try await stores[0].runStatus(runId, now: now) else {
                    throw CLIError(description: "no run \(runId)", exitCode: Self.unknownRun)
                }
                let store = try await database.app(owner)
                shown = [AppStatus(app: owner, status: status, feed: try await feed(store), measuredAt: now, sandbox: try await sandbox(store))]
            } else {
                for store in stores {
                    shown.append(AppStatus(app: store.app, status: try await store.runStatus(nil, now: now), feed: try await feed(store),
                                           measuredAt: now, sandbox: try await sandbox(store)))
                }
            }
            // The webhook endpoints, with what waits for each (none: nothing said).
            let webhooks = runId == nil ? try await database.webhookStats() : []
            if json {
                var out = StatusJSON(shown)
                out.webhooks = webhooks.isEmpty ? nil : webhooks.map { WebhookEndpointJSON($0, secrets: nil) }
                print(try JSONOutput.line(out))
            } else {
                print(PerAppText.lines(shown.map { ($0.app, $0.text) }, headed: stores.count > 1).joined(separator: "\n"))
                for w in webhooks { print("webhooks: \(w.endpoint.name) (\(w.endpoint.bundleId)): \(WebhooksText.counts(w, secrets: nil, now: Date()))\(w.endpoint.enabled ? "" : ", DISABLED: \(w.endpoint.disabledReason ?? "?")")") }
            }
        }
    }

    static func text(_ s: RunStatus) -> [String] {
        func list(_ d: [String: Int]) -> String {
            d.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        let r = s.run
        var out = ["run \(r.id) (\(r.kind.rawValue), as of \(isoTime(r.asOf))): \(r.status.rawValue)"]
        out.append("started \(isoTime(r.startedAt)); " + (r.finishedAt.map { "finished \(isoTime($0))" } ?? "not finished"))
        let i = s.items
        let percent = i.total > 0 ? String(format: " (%.1f%%)", Double(s.finishedItems) * 100 / Double(i.total)) : ""
        var items = "items: \(s.finishedItems) of \(i.total) finished\(percent): \(i.done) polled, \(i.failed) failed"
        if !s.failedByReason.isEmpty { items += " (\(list(s.failedByReason)))" }
        items += "; \(i.claimed) claimed, \(i.pending) pending; \(r.due) due"
        out.append(items)
        var calls = "Apple calls: \(s.callsTotal)"
        if !s.calls.isEmpty { calls += " (\(list(s.calls)))" }
        if let rate = s.callRate { calls += ", \(formatRate(rate))/s over \(formatDuration(s.activeSeconds)) of work" }
        if let n = s.http429 { calls += "; 429s: \(n)" }
        out.append(calls)
        if let seen = s.lastSeen {
            let ago = max(0, s.measuredAt.timeIntervalSince(seen))
            out.append("workers: \(s.workers.count), last seen \(isoTime(seen)) (\(formatDuration(ago)) ago)")
        } else {
            out.append("workers: none yet")
        }
        switch (s.items.pending + s.items.claimed, s.eta, s.itemRate) {
        case (0, _, _):
            out.append("ETA: nothing left")
        case (_, let eta?, let rate?):
            out.append("ETA: \(formatDuration(eta)) at \(formatRate(rate)) items/s" + (r.status == .running ? "" : " (once resumed)"))
        default:
            out.append("ETA: unknown (no items finished yet)")
        }
        return out
    }

    static func formatRate(_ r: Double) -> String {
        String(format: r >= 10 ? "%.0f" : "%.1f", r)
    }
}
