import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Polling

struct BackfillCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backfill",
        abstract: "Poll a cohort of subscriptions now: a run of kind backfill, on the nightly run's queue and Apple budget.",
        discussion: """
            Cohort selectors combine (AND): --product, --group, --purchased-from/--purchased-to, --ids, \
            --segment, --environment; --all selects every registered subscription (with other selectors \
            it adds nothing: --all --environment Sandbox is every Sandbox subscription).
            Product, group and original purchase date are known only after a first successful poll: \
            never-polled subscriptions have none, so those selectors leave them out (--segment unknown, \
            --ids, --environment and --all include them; the nightly run polls them anyway as "new").
            --purchased-from/--purchased-to compare Apple's original purchase date in [from, to); a date \
            alone means its midnight UTC (January: --purchased-from 2026-01-01 --purchased-to 2026-02-01).

            Budget: a backfill draws from the same shared Apple budget as every other process, so together \
            they never exceed the configured rate. While a nightly run is active (its owner holds the \
            nightly lock), the backfill keeps to --nightly-share of the rate (default 0.2: at most 20 %, so \
            the night keeps at least 80 %); otherwise it uses all of it.

            One backfill at a time (a lock of its own, separate from the nightly run's). A stopped backfill \
            (crash, SIGTERM, --max-duration, Apple or PostgreSQL unavailable) is resumed by running the same \
            command again or `churnwatch backfill --resume`; a backfill of another cohort is refused (exit 75) \
            until it is done. SIGTERM or SIGINT stops claiming, finishes in-flight work within \
            --shutdown-grace, commits and exits 75 ("resumable: run N"); a second signal exits at once.
            Exit codes as `run`: 0 done, 75 stopped early but resumable, 78 bad configuration, \
            69 a dependency unreachable at start, 1 a bug.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions

    @Option(name: .customLong("product"), parsing: .upToNextOption, help: ArgumentHelp("Current product id(s).", valueName: "id"))
    var products: [String] = []

    @Option(name: .customLong("group"), help: ArgumentHelp("Subscription group id.", valueName: "id"))
    var group: String?

    @Option(name: .customLong("purchased-from"), help: ArgumentHelp("Original purchase at or after this time (ISO 8601, or a date).", valueName: "time"))
    var purchasedFrom: String?

    @Option(name: .customLong("purchased-to"), help: ArgumentHelp("Original purchase before this time (ISO 8601, or a date).", valueName: "time"))
    var purchasedTo: String?

    @Option(name: .customLong("ids"), help: ArgumentHelp("A file with one original transaction id per line (blank lines and # comments skipped).", valueName: "file"))
    var idsFile: String?

    @Option(name: .customLong("segment"), parsing: .upToNextOption, help: ArgumentHelp("Current segment(s), e.g. billing_retry unknown.", valueName: "name"))
    var segments: [String] = []

    @Option(name: .customLong("environment"), help: ArgumentHelp("Registered environment: Production or Sandbox.", valueName: "env"))
    var environment: String?

    @Flag(name: .customLong("all"), help: "Every registered subscription (other selectors still narrow it).")
    var all = false

    @Flag(name: .customLong("full-history"), help: "Read every subscription's whole transaction history again (one history call per 20 transactions).")
    var fullHistory = false

    @Flag(name: .customLong("dry-run"), help: "Print the cohort's size, the API calls and the time they take; write nothing.")
    var dryRun = false

    @Flag(name: .customLong("resume"), help: "Resume the unfinished backfill, whatever its cohort.")
    var resume = false

    @Flag(name: .customLong("join"), help: "Work the backfill in progress alongside its owner; no planning, no closing.")
    var join = false

    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment the backfill is for, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    @Option(name: .customLong("nightly-share"), parsing: .unconditional, help: ArgumentHelp("The share of Apple's budget the backfill keeps to while a nightly run is active (default 0.2).", valueName: "fraction"))
    var nightlyShare = "0.2"

    @OptionGroup var worker: WorkerOptions

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let logger = Logger(label: "churnwatch.backfill")
            let env = ProcessInfo.processInfo.environment
            let url = try global.resolvedDatabaseURL(env)
            let asOfDate = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let cohort = try resolvedCohort()
            if resume || join {
                guard !cohort.hasSelector else { throw CLIError.configuration("--\(resume ? "resume" : "join") takes no cohort selectors: it works the unfinished backfill") }
                guard !dryRun else { throw CLIError.configuration("--dry-run needs a cohort, not --\(resume ? "resume" : "join")") }
            } else if !cohort.hasSelector {
                throw CLIError.configuration("backfill needs a cohort: --product, --group, --purchased-from/--purchased-to, --ids, --segment, --environment, or --all")
            }
            guard let share = Double(nightlyShare), share >= 0.01, share <= 1 else {
                throw CLIError.configuration("--nightly-share \"\(nightlyShare.prefix(40))\" is not a fraction from 0.01 to 1 (e.g. 0.2)")
            }
            if dryRun {
                try await printDryRun(url: url, cohort: cohort, asOf: asOfDate, share: share, env: env)
                return
            }

            var options = RunOptions(asOf: asOfDate)
            try worker.apply(to: &options, join: join)
            let config = try await Self.configuration(url: url, apple: apple, app: app, logger: logger)

            let budgetLogger = logger
            let parts = try await EngineParts.open(url: url, options: options, config: config, yield: { store in
                BudgetYield(share: share, interval: 1, isActive: {
                    try? await store.runLockHeld(.nightly)
                }, onChange: { active in
                    if active {
                        budgetLogger.notice("a nightly run is active: the backfill keeps to its share of the budget", metadata: ["share": "\(share)"])
                    } else {
                        budgetLogger.notice("no nightly run: the backfill uses the whole budget")
                    }
                })
            }, logger: logger)

            var history = fullHistory
            if resume || join {
                // The poller follows the unfinished backfill's own settings.
                guard let unfinished = try await parts.store.runFindUnfinished(kind: .backfill) else {
                    print(resume ? "no unfinished backfill to resume" : "no backfill in progress to join")
                    return
                }
                history = (try? unfinished.params.decode(BackfillParams.self))?.fullHistory ?? false
                options.backfill = .resume
            } else {
                options.backfill = .cohort(cohort, fullHistory: fullHistory)
            }
            options.fullHistory = history
            options.params = try StoredJSON(encoding: BackfillParams(cohort: cohort, fullHistory: history,
                                                                       concurrency: options.concurrency, batchSize: options.batchSize))
            let engine = parts.engine(options: options, fullHistory: history, logger: logger)
            let signals = SignalHandler { engine.requestStop(.signal) }
            defer { signals.cancel() }

            let outcome = try await engine.run { report in
                logger.debug("batch committed", metadata: ["run": "\(report.runId)", "polled": "\(report.polled)", "failed": "\(report.failed)"])
            }
            try Self.report(outcome, stats: engine.stats)
        }
    }

    /// The cohort from the selector flags; a configuration error (78) naming the flag when one is wrong.
    func resolvedCohort() throws -> BackfillCohort {
        var c = BackfillCohort()
        c.all = all
        c.productIds = products.flatMap { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
        if let group {
            guard !group.isEmpty else { throw CLIError.configuration("--group needs a subscription group id") }
            c.groupId = group
        }
        c.purchasedFrom = try TimeArgument.parse(purchasedFrom, flag: "--purchased-from")
        c.purchasedBefore = try TimeArgument.parse(purchasedTo, flag: "--purchased-to")
        if let from = c.purchasedFrom, let before = c.purchasedBefore, from >= before {
            throw CLIError.configuration("--purchased-from \(purchasedFrom ?? "") is not before --purchased-to \(purchasedTo ?? "")")
        }
        if let idsFile { c.ids = try Self.readIds(idsFile) }
        c.segments = try segments.flatMap { $0.split(separator: ",").map(String.init) }.map { name in
            guard let s = Segment(rawValue: name) else {
                throw CLIError.configuration("--segment \"\(name)\" is not a segment (one of: \(Segment.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            return s
        }
        c.configuredEnvironment = apple.configuredEnvironment() ?? .production
        if let environment {
            guard let registered = AppStoreEnvironment(registered: environment) else {
                throw CLIError.configuration("--environment \"\(environment)\" is not Production or Sandbox")
            }
            c.environment = registered
        }
        // With another selector, --all adds nothing (and the same cohort is recognised either way).
        var others = c
        others.all = false
        if others.hasSelector { c.all = false }
        return c
    }

    /// One id per line; blank lines, `#` comments and an `original_transaction_id` header are
    /// skipped; of a CSV line, the first field is taken. Duplicates count once.
    static func readIds(_ path: String) throws -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError.configuration("--ids: cannot read \(path)")
        }
        var seen = Set<String>()
        var ids: [String] = []
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let field = line.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let id = field.trimmingCharacters(in: CharacterSet.whitespaces.union(CharacterSet(charactersIn: "\"")))
            if id.isEmpty || id.hasPrefix("#") || id == "original_transaction_id" { continue }
            if seen.insert(id).inserted { ids.append(id) }
        }
        guard !ids.isEmpty else { throw CLIError.configuration("--ids: \(path) holds no ids") }
        return ids
    }

    /// The configuration of the app backfilled: `--app`'s (from `churnwatch.apps`), else the
    /// deployment's, which is the default app.
    static func configuration(url: String, apple: AppleOptions, app: AppOptions, logger: Logger) async throws -> AppStoreConfiguration {
        let deployment = try apple.configuration(logger: logger)
        let store = DatabaseStore.open(url, logger: logger)
        try await store.schemaCheck(migrations: BuildMigrations.names())
        try await store.appsMarkDefault(deployment.bundleId)
        guard !app.apps.isEmpty else { return deployment }
        guard let record = try app.selected(from: try await store.appsList()).first, app.apps.count == 1 else {
            throw CLIError.configuration("a backfill works for one app at a time: give --app once")
        }
        return try apple.configuration(for: record, deploymentApp: deployment.bundleId, logger: logger)
    }

    func printDryRun(url: String, cohort: BackfillCohort, asOf: Date, share: Double, env: [String: String]) async throws {
        let sandbox = apple.configuredEnvironment(env) == .sandbox
        let defaultRate: Double = sandbox ? 5 : 50
        let status = try PlanCommand.rate(apple.statusRate ?? env["APPSTORE_STATUS_RATE"], name: "APPSTORE_STATUS_RATE") ?? defaultRate
        let history = try PlanCommand.rate(apple.historyRate ?? env["APPSTORE_HISTORY_RATE"], name: "APPSTORE_HISTORY_RATE") ?? status
        let store = try await app.singleStore(global)
        let counts = try await store.backfillCount(cohort, asOf: asOf)
        print("backfill cohort (\(cohort.summary)) as of \(asOf.ISO8601Format()): \(counts.total) subscriptions (\(counts.neverPolled) never polled, \(counts.receiptOnly) with legacy receipts)")
        if cohort.ids != nil {
            print("ids in the file that are not registered subscriptions (left out): \(counts.idsNotRegistered)")
        }
        let statusCalls = counts.total - counts.receiptOnly
        let historyCalls = fullHistory ? statusCalls : counts.likelyHistory
        let historyText = fullHistory ? "at least \(historyCalls) (--full-history: one per 20 transactions of each)" : "about \(historyCalls) (first polls and periods past their end)"
        print("API calls: status \(statusCalls), history \(historyText), verifyReceipt \(counts.receiptOnly)")
        let seconds = max(Double(statusCalls + counts.receiptOnly) / status, Double(historyCalls) / history)
        print("ETA at \(PlanCommand.formatRate(status))/s status and \(PlanCommand.formatRate(history))/s history: \(formatDuration(seconds)); "
              + "while a nightly run is active the backfill keeps to \(Int((share * 100).rounded())) % of the budget: up to \(formatDuration(seconds / share))")
    }

    static func report(_ outcome: RunOutcome, stats: WorkerStats) throws {
        try RunOutcomeReport.report(outcome, stats: stats, noun: "backfill")
    }
}
