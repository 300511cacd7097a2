import Foundation
import Logging
import Postgres

/// All SQL for churnwatch's own tables, behind named operations (entity first:
/// `subscriptionsImport`, `runCreate`, ...). Nothing outside this module builds SQL.
/// The database driver stays inside: callers open a store with a connection string and reach
/// PostgreSQL only through these operations (locks and reconnection included, in
/// `ChurnStore+Connection.swift` and `RunLocks.swift`).
public struct ChurnStore: Sendable {
    let pool: PostgresPool
    let logger: Logger
    let claimCursors: ClaimCursors
    /// The app (bundle id) this store works for: every row it writes names it, every read of one
    /// app's rows (a run's plan, its feed, its segments) is of this app's. `scoped(to:)` gives
    /// another app's store on the same connections.
    public let app: String

    /// - Parameters:
    ///   - connectionString: libpq connection string or `postgresql://` URL.
    ///   - connections: the most connections open at once.
    ///   - app: the app's bundle id.
    ///   - logger: the store's own lines (stale statistics, ...).
    ///   - databaseLogger: the driver's lines (a dropped connection, a retried transaction).
    public init(connectionString: String, connections: Int, app: String, logger: Logger, databaseLogger: Logger) {
        self.init(pool: PostgresPool(connectionString: connectionString, size: connections, logger: databaseLogger), logger: logger, app: app)
    }

    /// A store on a pool the caller built (tests: a pool with overrides; their app is the
    /// simulator's default one unless they name another).
    init(pool: PostgresPool, logger: Logger, app: String = "com.example.churnwatch") {
        self.pool = pool
        self.logger = logger
        self.app = app
        self.claimCursors = ClaimCursors()
    }

    private init(_ other: ChurnStore, app: String) {
        (pool, logger, claimCursors, self.app) = (other.pool, other.logger, other.claimCursors, app)
    }

    /// The same connections, working for `app`.
    public func scoped(to app: String) -> ChurnStore {
        ChurnStore(self, app: app)
    }
}

/// The schema is missing or behind this build.
public struct SchemaError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

extension ChurnStore {
    /// Fails with one line when the schema has not been migrated. With `migrations` (the file
    /// names of this build's `sql/migrations`), also when a migration of this build is not
    /// applied yet, or when the database has one this build does not know (a newer churnwatch
    /// migrated it: this binary's statements may no longer fit its tables).
    public func schemaCheck(migrations: [String]? = nil) async throws {
        let (ok, applied) = try await pool.withConnection { db -> (Bool, [String]) in
            let ok = try db.query("SELECT to_regclass('churnwatch.api_budget') IS NOT NULL")[0].decode(Bool.self, at: 0)
            guard ok, migrations != nil else { return (ok, []) }
            return (ok, try db.query("SELECT name FROM churnwatch.schema_migrations ORDER BY name").map { try $0.decode(String.self, at: 0) })
        }
        guard ok else { throw SchemaError(description: "the churnwatch schema is missing or out of date: run `churnwatch migrate` first") }
        guard let migrations else { return }
        if let unknown = applied.first(where: { !migrations.contains($0) }) {
            throw SchemaError(description: Migrator.notInThisBuild(unknown))
        }
        if let pending = migrations.first(where: { !applied.contains($0) }) {
            throw SchemaError(description: "the churnwatch schema is out of date (migration \(pending) is not applied): run `churnwatch migrate` first")
        }
    }
}

extension ChurnStore {
    /// Tables whose planner statistics a bulk change makes stale.
    enum BulkTable: String {
        case subscriptions = "churnwatch.subscriptions"
        case runItems = "churnwatch.run_items"

        var analyze: PostgresQuery {
            switch self {
            case .subscriptions: "ANALYZE churnwatch.subscriptions"
            case .runItems: "ANALYZE churnwatch.run_items"
            }
        }
    }

    /// ANALYZE after a bulk change (an import, a run's planning). The workers' batch statements
    /// join a few hundred ids against these tables; planned with the statistics of an empty
    /// or older table, PostgreSQL scans the whole table per batch instead of probing its
    /// index, and a night turns quadratic. Autovacuum would notice only after a minute or so.
    /// Statistics only speed things up: a failure is logged, not thrown.
    func refreshStatistics(_ table: BulkTable) async {
        do {
            try await pool.withConnection { db in try db.execute(table.analyze) }
        } catch {
            logger.warning("could not refresh planner statistics", metadata: ["table": "\(table.rawValue)", "error": "\(error)"])
        }
    }
}
