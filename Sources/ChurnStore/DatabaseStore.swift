import Foundation
import Logging
import Postgres

/// The whole database, not one app's rows: its schema, its apps, prune, the win-back queue's
/// consumers (entry ids are global: a consumer drains every app), a run found by its id. A
/// store of one app (``ChurnStore``) is made here, for an app of `churnwatch.apps`, and nowhere
/// else: no store works for "no app".
public struct DatabaseStore: Sendable {
    let pool: PostgresPool
    let logger: Logger
    let claimCursors: ClaimCursors

    /// - Parameters:
    ///   - connectionString: libpq connection string or `postgresql://` URL.
    ///   - connections: the most connections open at once (shared with the app stores made from it).
    ///   - logger: the store's own lines (stale statistics, ...).
    ///   - databaseLogger: the driver's lines (a dropped connection, a retried transaction).
    public init(connectionString: String, connections: Int, logger: Logger, databaseLogger: Logger) {
        self.init(pool: PostgresPool(connectionString: connectionString, size: connections, logger: databaseLogger), logger: logger,
                  claimCursors: ClaimCursors())
    }

    init(pool: PostgresPool, logger: Logger, claimCursors: ClaimCursors = ClaimCursors()) {
        (self.pool, self.logger, self.claimCursors) = (pool, logger, claimCursors)
    }

    /// The store of an app read from `churnwatch.apps` (``appsList()``), on the same connections.
    public func scoped(to app: AppRecord) -> ChurnStore {
        ChurnStore(pool: pool, logger: logger, claimCursors: claimCursors, app: app.bundleId)
    }

    /// The store of the app `bundleId` names (in any spelling: bundle ids compare without case),
    /// or one line saying it is not an app of the database (``AppsError``).
    public func app(_ bundleId: String) async throws -> ChurnStore {
        let apps = try await appsList()
        guard let app = AppRecord.named(bundleId, in: apps) else {
            let known = apps.map(\.bundleId).joined(separator: ", ")
            throw AppsError(description: "\(bundleId.prefix(160)) is not an app of this database (apps: \(known.isEmpty ? "none" : known)); add it with `churnwatch apps add`, or set APPSTORE_BUNDLE_ID and run `churnwatch migrate`")
        }
        return scoped(to: app)
    }

    /// The app (bundle id) run `runId` is of, whatever this store's app; nil when there is no
    /// such run. Run ids are global: `churnwatch status RUN` shows a run of any app.
    public func runApp(_ runId: Int64) async throws -> String? {
        try await pool.withConnection { db in
            try db.query("SELECT bundle_id FROM churnwatch.runs WHERE id = \(runId)").first?.decode(String.self, at: 0)
        }
    }
}

extension DatabaseStore {
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

    /// Whether the schema is there at all (false: never migrated); one from before apps were
    /// kept (no `churnwatch.apps`) is refused in one line.
    public func schemaPresent() async throws -> Bool {
        let (subscriptions, apps) = try await pool.withConnection { db in
            let row = try db.query("""
                SELECT to_regclass('churnwatch.subscriptions') IS NOT NULL, to_regclass('churnwatch.apps') IS NOT NULL
                """)[0]
            return (try row.decode(Bool.self, at: 0), try row.decode(Bool.self, at: 1))
        }
        if subscriptions, !apps {
            throw SchemaError(description: "the churnwatch schema is behind this build (no churnwatch.apps): run `churnwatch migrate` first")
        }
        return subscriptions
    }
}
