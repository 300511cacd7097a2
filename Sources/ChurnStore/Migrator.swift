import Foundation
import Logging
import Postgres

/// One migration file: `sql/migrations/NNNN_name.sql`.
public struct Migration: Sendable, Equatable {
    /// The file name without directory, e.g. `0001_init.sql`; sorts in apply order.
    public var name: String
    public var sql: String

    public init(name: String, sql: String) {
        self.name = name
        self.sql = sql
    }
}

/// Where a migration stands against a database.
public struct MigrationStatus: Sendable, Equatable {
    public enum State: String, Sendable { case applied, pending, changed, unknownFile = "not in this build" }
    public var name: String
    public var state: State
    public var appliedAt: Date?
}

/// Why migrating refused to start; each is bad configuration (exit 78).
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Applies `sql/migrations` in order, each in its own transaction, recording name, checksum
/// and time in `churnwatch.schema_migrations`. Two migrators at once serialize on an advisory
/// lock; an applied file whose checksum changed stops everything before any work.
public struct Migrator: Sendable {
    public let migrations: [Migration]
    private let logger: Logger
    /// The deployment's app (`APPSTORE_BUNDLE_ID`): migration 0018 gives it every row already in
    /// the database, and after migrating it is the default app (`churnwatch.apps`).
    private let defaultBundleId: String?

    static let lockKey = PostgresAdvisoryLockKey.named("churnwatch.migrate")

    public init(migrations: [Migration], logger: Logger, defaultBundleId: String? = nil) {
        self.migrations = migrations.sorted { $0.name < $1.name }
        self.logger = logger
        self.defaultBundleId = defaultBundleId.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Reads `NNNN_name.sql` files from a directory.
    public static func load(directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError("cannot read the migrations directory \(directory.path): set CHURNWATCH_MIGRATIONS_DIR or --migrations-dir to the project's sql/migrations")
        }
        var out: [Migration] = []
        for name in names.sorted() where name.hasSuffix(".sql") {
            guard name.prefix(4).allSatisfy(\.isNumber), name.dropFirst(4).first == "_" else {
                throw MigrationError("migration file \(name) is not named NNNN_name.sql")
            }
            let url = directory.appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: url.path),
                  let sql = String(data: data, encoding: .utf8) else {
                throw MigrationError("cannot read migration file \(url.path)")
            }
            out.append(Migration(name: name, sql: sql))
        }
        guard !out.isEmpty else { throw MigrationError("no migration files in \(directory.path)") }
        return out
    }

    /// Finds `sql/migrations`: an explicit path, else `CHURNWATCH_MIGRATIONS_DIR`, else next to
    /// the executable (`../share/churnwatch/migrations`, or a checkout containing it), else the
    /// working directory's `sql/migrations`.
    public static func locateDirectory(explicit: String?, environment: [String: String], executable: String) -> URL {
        if let explicit, !explicit.isEmpty { return URL(fileURLWithPath: explicit) }
        if let env = environment["CHURNWATCH_MIGRATIONS_DIR"], !env.isEmpty { return URL(fileURLWithPath: env) }
        let fm = FileManager.default
        var dir = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        let share = dir.deletingLastPathComponent().appendingPathComponent("share/churnwatch/migrations")
        if fm.fileExists(atPath: share.path) { return share }
        for _ in 0..<6 {
            let candidate = dir.appendingPathComponent("sql/migrations")
            if fm.fileExists(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: fm.currentDirectoryPath).appendingPathComponent("sql/migrations")
    }

    /// Lists applied, pending and changed migrations.
    public func status(_ db: PostgresConnection) throws -> [MigrationStatus] {
        let exists = try db.query("SELECT to_regclass('churnwatch.schema_migrations') IS NOT NULL")[0].decode(Bool.self, at: 0)
        let applied = exists ? try appliedMigrations(db) : [:]
        var out: [MigrationStatus] = []
        for m in migrations {
            if let row = applied[m.name] {
                let same = try checksum(db, m.sql) == row.checksum
                out.append(MigrationStatus(name: m.name, state: same ? .applied : .changed, appliedAt: row.appliedAt))
            } else {
                out.append(MigrationStatus(name: m.name, state: .pending, appliedAt: nil))
            }
        }
        for (name, row) in applied where !migrations.contains(where: { $0.name == name }) {
            out.append(MigrationStatus(name: name, state: .unknownFile, appliedAt: row.appliedAt))
        }
        return out.sorted { $0.name < $1.name }
    }

    /// Applies every pending migration; returns the names applied (empty when up to date).
    @discardableResult
    public func migrate(_ db: PostgresConnection) throws -> [String] {
        try db.advisoryLock(Self.lockKey)
        defer { _ = try? db.advisoryUnlock(Self.lockKey) }
        try ensureBookkeeping(db)
        let applied = try appliedMigrations(db)
        if let unknown = applied.keys.sorted().first(where: { name in !migrations.contains { $0.name == name } }) {
            throw MigrationError(Self.notInThisBuild(unknown) + "; nothing was changed")
        }
        var checksums: [String: String] = [:]
        for m in migrations {
            let sum = try checksum(db, m.sql)
            checksums[m.name] = sum
            if let row = applied[m.name], row.checksum != sum {
                throw MigrationError("migration \(m.name) was changed after it was applied: restore the file and put the change in a new migration")
            }
        }
        var done: [String] = []
        for m in migrations where applied[m.name] == nil {
            let sum = checksums[m.name]!
            do {
                try db.transaction { tx in
                    if let defaultBundleId {
                        _ = try tx.query("SELECT set_config('churnwatch.default_bundle_id', \(defaultBundleId), true)")
                    }
                    try tx.runScript(m.sql)
                    try tx.execute("""
                        INSERT INTO churnwatch.schema_migrations (name, checksum) VALUES (\(m.name), \(sum))
                        """)
                }
            } catch let error as PostgresError where error.sqlState == "P0001" {
                // A migration's own refusal (RAISE EXCEPTION): its message is the line to print.
                throw MigrationError(error.message)
            }
            logger.info("applied migration", metadata: ["migration": "\(m.name)"])
            done.append(m.name)
        }
        if let defaultBundleId, try db.query("SELECT to_regclass('churnwatch.apps') IS NOT NULL")[0].decode(Bool.self, at: 0) {
            try AppsTable.markDefault(db, bundleId: defaultBundleId)
        }
        return done
    }

    /// One line for a database migrated by a newer churnwatch than this one.
    public static func notInThisBuild(_ name: String) -> String {
        "the database has migration \(name), which is not in this build (a newer churnwatch applied it): "
            + "run that version, or point CHURNWATCH_MIGRATIONS_DIR at its sql/migrations"
    }

    private func ensureBookkeeping(_ db: PostgresConnection) throws {
        try db.runScript("""
            CREATE SCHEMA IF NOT EXISTS churnwatch;
            CREATE TABLE IF NOT EXISTS churnwatch.schema_migrations (
                name        text PRIMARY KEY,
                checksum    text NOT NULL,
                applied_at  timestamptz NOT NULL DEFAULT now()
            );
            """)
    }

    private func appliedMigrations(_ db: PostgresConnection) throws -> [String: (checksum: String, appliedAt: Date)] {
        var out: [String: (checksum: String, appliedAt: Date)] = [:]
        for row in try db.query("SELECT name, checksum, applied_at FROM churnwatch.schema_migrations") {
            out[try row.decode(String.self, "name")] = (try row.decode(String.self, "checksum"), try row.decode(Date.self, "applied_at"))
        }
        return out
    }

    private func checksum(_ db: PostgresConnection, _ sql: String) throws -> String {
        try db.query("SELECT encode(sha256(convert_to(\(sql), 'UTF8')), 'hex')")[0].decode(String.self, at: 0)
    }
}

extension Migrator {
    /// ``status(_:)`` on a connection of its own to `connectionString` (`databaseLogger`: the
    /// driver's lines).
    public func status(connectionString: String, databaseLogger: Logger) throws -> [MigrationStatus] {
        try status(try PostgresConnection(connectionString: connectionString, logger: databaseLogger))
    }

    /// ``migrate(_:)`` on a connection of its own to `connectionString` (`databaseLogger`: the
    /// driver's lines).
    @discardableResult
    public func migrate(connectionString: String, databaseLogger: Logger) throws -> [String] {
        try migrate(try PostgresConnection(connectionString: connectionString, logger: databaseLogger))
    }
}
