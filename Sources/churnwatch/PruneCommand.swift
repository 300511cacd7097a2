import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Synchronization

/// How long each table's rows are kept (docs/contracts.md, "Retention"): flags, else environment
/// variables, else the defaults.
struct RetentionOptions: ParsableArguments {
    @Option(name: .customLong("retention"), help: ArgumentHelp("Retention per table, e.g. run_items=35d,notifications=200d; tables not named keep their default (default: $CHURNWATCH_RETENTION; tables and defaults: docs/contracts.md).", valueName: "table=duration,..."))
    var retention: String?

    /// The policy; one line naming the setting and the table when a value is unusable (78).
    func policy(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> RetentionPolicy {
        let (name, text) = retention.map { ("--retention", $0) } ?? ("CHURNWATCH_RETENTION", env["CHURNWATCH_RETENTION"] ?? "")
        var policy = RetentionPolicy()
        for part in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !part.isEmpty {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let tables = RetentionPolicy.Table.allCases.map(\.rawValue).joined(separator: ", ")
            guard pair.count == 2, let table = RetentionPolicy.Table(rawValue: pair[0]) else {
                throw CLIError.configuration("\(name): \"\(part.prefix(40))\" is not table=duration with a table of \(tables)")
            }
            let keep = try parseDurationSetting("\(name) \(table.rawValue)", pair[1], positive: true)
            do {
                try policy.set(table, keep)
            } catch {
                throw CLIError.configuration("\(name): \(error)")
            }
        }
        return policy
    }

    /// Whether a nightly run that finished prunes after it (`CHURNWATCH_PRUNE`, default on).
    static func afterRun(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> Bool {
        try onOffSetting("CHURNWATCH_PRUNE", env["CHURNWATCH_PRUNE"] ?? "")
    }
}

enum PruneText {
    /// One line: rows per table, and the longest statement (the longest any lock was held).
    static func line(_ r: PruneReport, dryRun: Bool) -> String {
        let rows = r.rows.map { "\($0.table) \($0.rows)" }.joined(separator: ", ")
        let head = dryRun ? "prune --dry-run: would remove" : "prune: removed"
        let longest = Double(r.longestStatement.components.seconds) + Double(r.longestStatement.components.attoseconds) / 1e18
        return "\(head) \(rows); \(r.statements) statements, the longest \(String(format: "%.3f", longest)) s"
            + (r.stopped ? "; stopped (the next prune goes on)" : "")
    }
}

struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete what the retention policy no longer keeps, in small batches (also at the end of each nightly run).",
        discussion: """
            Prunes every app's rows at once (no --app: the retention policy is the database's). Kept forever: subscriptions, churn_events, segment_daily, subscription_segments, winback_queue, runs. \
            Trimmed by age: run_items (and run_workers) of finished runs, notifications, processed notification_inbox \
            rows, quarantine, segment_changes, transactions other than each subscription's newest (docs/contracts.md, \
            "Retention", for what each keeps and why). Each statement deletes at most a few thousand rows in its own \
            transaction, so a run, a sync, --join workers and consumers beside it never wait long; rows of unfinished runs \
            are never touched. Stopped (SIGTERM, SIGINT), it exits 75 and the next prune goes on. The space is reused by \
            PostgreSQL after autovacuum (docs/runbook, "Storage").

            Exit codes: 0; 75 stopped; 78 a bad setting; 69 database unreachable.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var retention: RetentionOptions

    @Flag(name: .customLong("dry-run"), help: "Count what would be removed; change nothing.")
    var dryRun = false

    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment ages are counted from for rows dated by a run or by Apple, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let policy = try retention.policy()
            let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let store = DatabaseStore.open(try global.resolvedDatabaseURL())
            try await store.schemaCheck()
            let stop = Mutex(false)
            let signals = SignalHandler { stop.withLock { $0 = true } }
            defer { signals.cancel() }
            let report = try await store.prune(policy, asOf: at, now: Date(), dryRun: dryRun, shouldStop: { stop.withLock { $0 } })
            print(PruneText.line(report, dryRun: dryRun))
            if report.stopped { throw CLIError.resumable("prune stopped on request; what it removed stays removed (re-run to go on)") }
        }
    }
}
