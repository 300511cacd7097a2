import AppStoreServerAPI
import ChurnStore
import Logging
import Polling

/// What `run` and `backfill` build to work a run: the store (a connection per lane, plus the
/// run's locks and its bookkeeping), the shared Apple budget, the client and the engine.
struct EngineParts {
    let store: ChurnStore
    let limiter: SharedBudgetLimiter
    let client: AppStoreServerAPIClient

    /// Opens the store for `options`' lanes and checks its schema; the budget shared with every
    /// process of the run (`yield`: a backfill's share while a nightly run is active).
    static func open(url: String, options: RunOptions, config: AppStoreConfiguration,
                     yield: (ChurnStore) -> BudgetYield? = { _ in nil }, logger: Logger) async throws -> EngineParts {
        let database = DatabaseStore.open(url, connections: options.lanes + 2, logger: logger)
        try await database.schemaCheck(migrations: BuildMigrations.names())
        let store = try await database.app(config.bundleId)
        let limiter = SharedBudgetLimiter(store: store, limits: config.rateLimits, namespace: config.bundleId, yield: yield(store),
                                          maxPause: config.retryPolicy.maxTotalWait, logger: logger)
        let client = AppStoreServerAPIClient(configuration: config, limiter: limiter, logger: Logger(label: "churnwatch.appstore"))
        return EngineParts(store: store, limiter: limiter, client: client)
    }

    /// The engine for `options`, its poller reading whole histories when `fullHistory`.
    func engine(options: RunOptions, fullHistory: Bool, logger: Logger) -> RunEngine {
        RunEngine(store: store, poller: SubscriptionPoller(client: client, fullHistory: fullHistory), options: options, logger: logger)
    }
}
