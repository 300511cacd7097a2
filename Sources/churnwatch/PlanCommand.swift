import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

struct PlanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show what a run would poll now, by reason, with the API calls and the time they take. Writes nothing."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var windows: WindowOptions
    @OptionGroup var feedOptions: FeedOptions

    @Option(name: .customLong("status-rate"), parsing: .unconditional, help: "Get All Subscription Statuses requests per second (default: $APPSTORE_STATUS_RATE, else 50 in Production, 5 in Sandbox).")
    var statusRate: Double?

    @Option(name: .customLong("history-rate"), parsing: .unconditional, help: "Get Transaction History requests per second (default: $APPSTORE_HISTORY_RATE, else like the status rate).")
    var historyRate: Double?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let env = ProcessInfo.processInfo.environment
            let asOf = try windows.resolvedAsOf()
            let w = try windows.resolvedWindows()
            let feedOn = try feedOptions.enabled(env)
            let sandbox = env["APPSTORE_ENVIRONMENT"].flatMap(AppStoreEnvironment.init(registered:)) == .sandbox
            let defaultRate: Double = sandbox ? 5 : 50
            let status = try statusRate ?? Self.rate(env["APPSTORE_STATUS_RATE"], name: "APPSTORE_STATUS_RATE") ?? defaultRate
            let history = try historyRate ?? Self.rate(env["APPSTORE_HISTORY_RATE"], name: "APPSTORE_HISTORY_RATE") ?? status
            guard status > 0, history > 0 else { throw CLIError.configuration("rates must be positive") }

            var stores = try await app.readingStores(global, migrations: BuildMigrations.names())
            if stores.isEmpty { stores = [try await app.singleStore(global, migrations: BuildMigrations.names())] }
            for store in stores {
                if stores.count > 1 { print("app \(store.app):") }
                try await printPlan(store, asOf: asOf, windows: w, feedOn: feedOn, rates: (status, history), env: env)
            }
        }
    }

    /// One app's plan: its feed, what is due by reason, the calls and how long they take.
    func printPlan(_ store: ChurnStore, asOf: Date, windows: PlanWindows, feedOn: Bool, rates: (status: Double, history: Double),
                   env: [String: String]) async throws {
        var w = windows
        let (status, history) = rates
        if feedOn {
            for environment in FeedStatusText.environments(env) {
                let feed = try await store.feedStatus(environment: environment, asOf: asOf)
                // As the run would plan after a sync that reads the feed through.
                if feed.hasNotifications && feed.state.cursor.syncedUntil != nil { w.feedEnvironments.insert(environment) }
                print((environment == w.configuredEnvironment ? "" : "\(environment.rawValue) ") + FeedStatusText.line(feed, asOf: asOf))
            }
        }
        let counts = try await store.planCounts(asOf: asOf, windows: w)
        print("plan as of \(asOf.ISO8601Format()) (start window \(formatWindow(w.start)), end window \(formatWindow(w.end)), lapsed window \(formatWindow(w.lapsed)), stale after \(formatWindow(w.staleAfter))"
              + (w.feedDriven ? "; with the feed \(formatWindow(w.feedStaleAfter)), each on its own night)" : ")"))
        if w.feedDriven {
            print("planned by the change feed: a subscription it keeps current is not polled for its dates; "
                  + "feed-driven reasons are where it is silent and should not be, the rest as without it")
        }
        print("reason             subscriptions")
        let everywhere = w.feedEnvironments.isSuperset(of: FeedStatusText.environments(env))
        for reason in DueReason.allCases where !w.feedDriven ? !reason.feedDriven
            : everywhere ? ChurnStore.feedReasons.contains(reason) : true {
            let n = counts.byReason[reason] ?? 0
            print("\(reason.rawValue.padding(toLength: 18, withPad: " ", startingAt: 0)) \(String(n).leftPad(13))")
        }
        print("\("total".padding(toLength: 18, withPad: " ", startingAt: 0)) \(String(counts.total).leftPad(13))")
        let statusCalls = counts.total - counts.receiptOnly
        let historyCalls = counts.likelyHistory
        print("API calls: status \(statusCalls), history about \(historyCalls) (first polls and periods past their end), verifyReceipt \(counts.receiptOnly)")
        let seconds = max(Double(statusCalls + counts.receiptOnly) / status, Double(historyCalls) / history)
        print("ETA at \(Self.formatRate(status))/s status and \(Self.formatRate(history))/s history: \(formatDuration(seconds))")
    }

    static func rate(_ value: String?, name: String) throws -> Double? {
        guard let value, !value.isEmpty else { return nil }
        guard let d = Double(value), d > 0, d.isFinite else { throw CLIError.configuration("\(name)=\(value) is not a positive number of requests per second") }
        return d
    }

    static func formatRate(_ r: Double) -> String {
        r == r.rounded() ? String(Int(r)) : String(format: "%.1f", r)
    }
}

extension String {
    func leftPad(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
