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
    /// app's rows (a run's plan, its feed, its segments) is of this app's. A store of an app is
    /// made by ``DatabaseStore`` for an app of `churnwatch.apps` (``DatabaseStore/scoped(to:)``,
    /// ``DatabaseStore/app(_:)``); what concerns the whole database is ``database``'s.
    public let app: String

    /// A store on a pool the caller built (tests: a pool with overrides; their app is the
    /// simulator's default one unless they name another).
    init(pool: PostgresPool, logger: Logger, app: String = "com.example.churnwatch") {
        self.init(pool: pool, logger: logger, claimCursors: ClaimCursors(), app: app)
    }

    init(pool: PostgresPool, logger: Logger, claimCursors: ClaimCursors, app: String) {
        precondition(!app.isEmpty, "a store of one app needs its bundle id (DatabaseStore for the whole database)")
        (self.pool, self.logger, self.claimCursors, self.app) = (pool, logger, claimCursors, app)
    }

    /// The whole database this app's store is part of, on the same connections.
    public var database: DatabaseStore { DatabaseStore(pool: pool, logger: logger, claimCursors: claimCursors) }
}

/// The schema is missing or behind this build.
public struct SchemaError: Error, Sendable, CustomStringConvertible {
    public var description: String
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
