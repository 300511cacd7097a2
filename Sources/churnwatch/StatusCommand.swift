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
            let all = ChurnStore.open(try global.resolvedDatabaseURL(), app: "")
            let store = all.scoped(to: try await app.forReading(all).first ?? "")
            try await store.schemaCheck()
            let feed = try await store.feedStatus(environment: FeedStatusText.environment(), asOf: now)
            let feedUsed = feed.state.lastSyncAt != nil || feed.state.cursor.inProgress != nil || feed.hasNotifications || feed.inboxPending > 0
            guard let status = try await store.runStatus(runId, now: now) else {
                if let runId { throw CLIError(description: "no run \(runId)", exitCode: Self.unknownRun) }
                if json {
                    print(try JSONOutput.line(NoRunJSON(feed: feedUsed ? FeedStatusJSON(feed, asOf: now) : nil)))
                } else {
                    print("no runs yet")
                    if feedUsed { print(FeedStatusText.line(feed, asOf: now)) }
                }
                return
            }
            if json {
                var out = RunStatusJSON(status)
                out.feed = feedUsed ? FeedStatusJSON(feed, asOf: now) : nil
                print(try JSONOutput.line(out))
            } else {
                print(Self.text(status).joined(separator: "\n"))
                if feedUsed { print(FeedStatusText.line(feed, asOf: now)) }
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

/// `churnwatch status --json` before any run: `{"run": null}`, and the feed once used.
struct NoRunJSON: Encodable {
    var feed: FeedStatusJSON?
    enum CodingKeys: String, CodingKey { case run, feed }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeNil(forKey: .run)
        try c.encodeIfPresent(feed, forKey: .feed)
    }
}

/// `churnwatch status --json`.
struct RunStatusJSON: Encodable {
    struct Run: Encodable {
        var id: Int64, kind: String, as_of: Date, status: String, started_at: Date, finished_at: Date?, due: Int
        enum CodingKeys: String, CodingKey { case id, kind, as_of, status, started_at, finished_at, due }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id); try c.encode(kind, forKey: .kind); try c.encode(as_of, forKey: .as_of)
            try c.encode(status, forKey: .status); try c.encode(started_at, forKey: .started_at)
            try c.encode(finished_at, forKey: .finished_at); try c.encode(due, forKey: .due)
        }
    }
    struct Items: Encodable {
        var total: Int, finished: Int, done: Int, failed: Int, claimed: Int, pending: Int, failed_by_reason: [String: Int]
    }
    struct Calls: Encodable {
        var total: Int, by_endpoint: [String: Int], per_second: Double?, http_429: Int?
        enum CodingKeys: String, CodingKey { case total, by_endpoint, per_second, http_429 }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(total, forKey: .total); try c.encode(by_endpoint, forKey: .by_endpoint)
            try c.encode(per_second, forKey: .per_second); try c.encode(http_429, forKey: .http_429)
        }
    }
    struct Workers: Encodable {
        var count: Int, last_seen_at: Date?
        enum CodingKeys: String, CodingKey { case count, last_seen_at }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(count, forKey: .count); try c.encode(last_seen_at, forKey: .last_seen_at)
        }
    }

    var run: Run, items: Items, calls: Calls, workers: Workers
    var active_seconds: Double, items_per_second: Double?, eta_seconds: Double?, measured_at: Date
    /// The change feed, once it was ever used (absent before).
    var feed: FeedStatusJSON?

    init(_ s: RunStatus) {
        run = Run(id: s.run.id, kind: s.run.kind.rawValue, as_of: s.run.asOf, status: s.run.status.rawValue,
                  started_at: s.run.startedAt, finished_at: s.run.finishedAt, due: s.run.due)
        items = Items(total: s.items.total, finished: s.finishedItems, done: s.items.done, failed: s.items.failed,
                      claimed: s.items.claimed, pending: s.items.pending, failed_by_reason: s.failedByReason)
        calls = Calls(total: s.callsTotal, by_endpoint: s.calls, per_second: s.callRate.map(Self.round), http_429: s.http429)
        workers = Workers(count: s.workers.count, last_seen_at: s.lastSeen)
        active_seconds = Self.round(s.activeSeconds)
        items_per_second = s.itemRate.map(Self.round)
        eta_seconds = s.eta.map { $0.rounded(.up) }
        measured_at = s.measuredAt
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(run, forKey: .run); try c.encode(items, forKey: .items); try c.encode(calls, forKey: .calls)
        try c.encode(workers, forKey: .workers); try c.encode(active_seconds, forKey: .active_seconds)
        try c.encode(items_per_second, forKey: .items_per_second); try c.encode(eta_seconds, forKey: .eta_seconds)
        try c.encode(measured_at, forKey: .measured_at)
    }

    private enum CodingKeys: String, CodingKey {
        case run, items, calls, workers, active_seconds, items_per_second, eta_seconds, measured_at
    }

    static func round(_ x: Double) -> Double { (x * 1000).rounded() / 1000 }
}
