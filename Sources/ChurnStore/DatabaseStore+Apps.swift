import Foundation
import Postgres

/// An app's own settings in `churnwatch.apps`. A nil setting is the deployment's (`APPSTORE_*`);
/// the private key is named by where it is (a file, an environment variable), never stored.
public struct AppSettings: Sendable, Equatable {
    public var appAppleId: Int64?
    /// `Production` or `Sandbox`; nil: `APPSTORE_ENVIRONMENT`.
    public var environment: String?
    public var issuerId: String?
    public var keyId: String?
    public var keyFile: String?
    public var keyEnv: String?
    public var statusRate: Double?
    public var historyRate: Double?
    /// The change feed on or off for this app; nil: `CHURNWATCH_NOTIFICATIONS`.
    public var notifications: Bool?

    public init(appAppleId: Int64? = nil, environment: String? = nil, issuerId: String? = nil, keyId: String? = nil,
                keyFile: String? = nil, keyEnv: String? = nil, statusRate: Double? = nil, historyRate: Double? = nil,
                notifications: Bool? = nil) {
        (self.appAppleId, self.environment) = (appAppleId, environment)
        (self.issuerId, self.keyId, self.keyFile, self.keyEnv) = (issuerId, keyId, keyFile, keyEnv)
        (self.statusRate, self.historyRate, self.notifications) = (statusRate, historyRate, notifications)
    }
}

/// A row of `churnwatch.apps`: an app the deployment polls. Only the store makes one (from the
/// table), so a value of this type proves the app exists: what takes one needs no check of its
/// own (and no foreign key to `apps` is needed on the tables that name an app).
public struct AppRecord: Sendable, Equatable {
    public let bundleId: String
    /// The deployment's `APPSTORE_BUNDLE_ID`: rows written without an app belong to it.
    public let isDefault: Bool
    public let settings: AppSettings

    init(bundleId: String, isDefault: Bool = false, settings: AppSettings = AppSettings()) {
        (self.bundleId, self.isDefault, self.settings) = (bundleId, isDefault, settings)
    }

    public var appAppleId: Int64? { settings.appAppleId }
    public var environment: String? { settings.environment }
    public var issuerId: String? { settings.issuerId }
    public var keyId: String? { settings.keyId }
    public var keyFile: String? { settings.keyFile }
    public var keyEnv: String? { settings.keyEnv }
    public var statusRate: Double? { settings.statusRate }
    public var historyRate: Double? { settings.historyRate }
    public var notifications: Bool? { settings.notifications }

    /// Bundle ids compare without case, as Apple's do ("Bundle IDs are case insensitive"): two
    /// spellings of one are one app (migration 0020 holds it in the table too).
    public static func sameBundleId(_ a: String, _ b: String) -> Bool {
        a.count == b.count && a.lowercased() == b.lowercased()
    }

    /// The app `name` names among `apps`: spelled the same, else spelled otherwise (``sameBundleId(_:_:)``).
    public static func named(_ name: String, in apps: [AppRecord]) -> AppRecord? {
        apps.first { $0.bundleId == name } ?? apps.first { sameBundleId($0.bundleId, name) }
    }
}

/// Why `apps add|set|remove` changed nothing.
public struct AppsError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// Statements on `churnwatch.apps` that the migrator runs too.
enum AppsTable {
    /// Makes `bundleId` the default app (adding it when missing), and no other.
    static func markDefault(_ db: PostgresConnection, bundleId: String) throws {
        try db.transaction { tx in
            let current = try tx.query("SELECT bundle_id FROM churnwatch.apps WHERE is_default FOR UPDATE").first?.decode(String.self, at: 0)
            guard current != bundleId else { return }
            if let other = try tx.query("""
                SELECT bundle_id FROM churnwatch.apps WHERE lower(bundle_id) = lower(\(bundleId)) AND bundle_id <> \(bundleId)
                """).first?.decode(String.self, at: 0) {
                throw AppsError(description: "APPSTORE_BUNDLE_ID \(bundleId) is the app \(other) of this database spelled otherwise (bundle ids compare without case, as Apple's do): set APPSTORE_BUNDLE_ID=\(other)")
            }
            try tx.execute("UPDATE churnwatch.apps SET is_default = false, updated_at = now() WHERE is_default")
            try tx.execute("""
                INSERT INTO churnwatch.apps (bundle_id, is_default) VALUES (\(bundleId), true)
                ON CONFLICT (bundle_id) DO UPDATE SET is_default = true, updated_at = now()
                """)
        }
    }
}

extension DatabaseStore {
    /// Makes the deployment's app (`APPSTORE_BUNDLE_ID`) the default app, adding it when missing.
    public func appsMarkDefault(_ bundleId: String) async throws {
        try await pool.withConnection { db in try AppsTable.markDefault(db, bundleId: bundleId) }
    }

    /// Every app, the default first, then by bundle id; none before migration 0018.
    public func appsList() async throws -> [AppRecord] {
        try await pool.withConnection { db in
            guard try db.query("SELECT to_regclass('churnwatch.apps') IS NOT NULL")[0].decode(Bool.self, at: 0) else { return [] }
            return try db.query("""
                SELECT bundle_id, is_default, app_apple_id, environment, issuer_id, key_id, key_file, key_env,
                       status_rate, history_rate, notifications
                FROM churnwatch.apps ORDER BY is_default DESC, bundle_id
                """).map { row in
                AppRecord(bundleId: try row.decode(String.self, "bundle_id"), isDefault: try row.decode(Bool.self, "is_default"), settings: AppSettings(
                    appAppleId: try row.decode(Int64?.self, "app_apple_id"), environment: try row.decode(String?.self, "environment"),
                    issuerId: try row.decode(String?.self, "issuer_id"), keyId: try row.decode(String?.self, "key_id"),
                    keyFile: try row.decode(String?.self, "key_file"), keyEnv: try row.decode(String?.self, "key_env"),
                    statusRate: try row.decode(Double?.self, "status_rate"), historyRate: try row.decode(Double?.self, "history_rate"),
                    notifications: try row.decode(Bool?.self, "notifications")))
            }
        }
    }

    /// Adds the app `bundleId` with `app`'s settings, or with `replace` sets every setting of one
    /// already there (the default mark is kept as it is). Adding one that exists changes nothing
    /// and fails. Returns the app as stored.
    @discardableResult
    public func appsSave(_ bundleId: String, _ app: AppSettings, replace: Bool) async throws -> AppRecord {
        try await pool.withTransaction { db in
            let exists = try db.query("SELECT 1 FROM churnwatch.apps WHERE bundle_id = \(bundleId) FOR UPDATE").count == 1
            if !exists, let other = try db.query("""
                SELECT bundle_id FROM churnwatch.apps WHERE lower(bundle_id) = lower(\(bundleId))
                """).first?.decode(String.self, at: 0) {
                throw AppsError(description: "\(bundleId) is the app \(other), spelled otherwise (bundle ids compare without case, as Apple's do): "
                                + (replace ? "name it \(other)" : "it is added already; change it with `churnwatch apps set \(other)`"))
            }
            if exists != replace {
                throw AppsError(description: exists
                    ? "app \(bundleId) is already added: change it with `churnwatch apps set`"
                    : "no app \(bundleId): add it with `churnwatch apps add` (`churnwatch apps list` shows the apps)")
            }
            let isDefault = try db.query("""
                INSERT INTO churnwatch.apps (bundle_id, app_apple_id, environment, issuer_id, key_id, key_file, key_env,
                                             status_rate, history_rate, notifications)
                VALUES (\(bundleId), \(app.appAppleId), \(app.environment), \(app.issuerId), \(app.keyId), \(app.keyFile),
                        \(app.keyEnv), \(app.statusRate), \(app.historyRate), \(app.notifications))
                ON CONFLICT (bundle_id) DO UPDATE SET app_apple_id = excluded.app_apple_id, environment = excluded.environment,
                    issuer_id = excluded.issuer_id, key_id = excluded.key_id, key_file = excluded.key_file, key_env = excluded.key_env,
                    status_rate = excluded.status_rate, history_rate = excluded.history_rate,
                    notifications = excluded.notifications, updated_at = now()
                RETURNING is_default
                """)[0].decode(Bool.self, at: 0)
            return AppRecord(bundleId: bundleId, isDefault: isDefault, settings: app)
        }
    }

    /// Stops polling an app: its row goes, every row of its data stays (readable by its bundle
    /// id; `apps add` brings it back). The default app cannot be removed: it is the deployment's.
    public func appsRemove(_ bundleId: String) async throws {
        try await pool.withTransaction { db in
            let rows = try db.query("SELECT is_default FROM churnwatch.apps WHERE bundle_id = \(bundleId) FOR UPDATE")
            guard let row = rows.first else {
                throw AppsError(description: "no app \(bundleId) (`churnwatch apps list` shows the apps)")
            }
            if try row.decode(Bool.self, at: 0) {
                throw AppsError(description: "\(bundleId) is the default app (APPSTORE_BUNDLE_ID): change APPSTORE_BUNDLE_ID first")
            }
            try db.execute("DELETE FROM churnwatch.apps WHERE bundle_id = \(bundleId)")
        }
    }
}
