import ArgumentParser
import ChurnStore
import Foundation

/// `--app`: which apps a command works on (docs/contracts.md "Several apps").
struct AppOptions: ParsableArguments {
    @Option(name: .customLong("app"), help: ArgumentHelp("Only this app, by bundle id; repeat for several (default: every app in churnwatch.apps; commands that work for one app: APPSTORE_BUNDLE_ID).", valueName: "bundle-id"))
    var apps: [String] = []

    /// The deployment's app: `APPSTORE_BUNDLE_ID`, or nil when unset.
    static func deploymentApp(_ env: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        env["APPSTORE_BUNDLE_ID"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The one app a command that works for one app works for: `--app` (an app of the database,
    /// ``named(_:)``), else `APPSTORE_BUNDLE_ID`, else the database's default app (`store`: any
    /// store of the database, after its schema check).
    func single(_ store: DatabaseStore, _ env: [String: String] = ProcessInfo.processInfo.environment) async throws -> String {
        if apps.count > 1 { throw CLIError.configuration("this command works for one app at a time: give --app once") }
        if let app = try await named(store).first ?? Self.deploymentApp(env) { return app }
        if let app = try await store.appsList().first(where: \.isDefault) { return app.bundleId }
        throw CLIError.configuration("which app? set APPSTORE_BUNDLE_ID (the deployment's app) or give --app BUNDLE_ID")
    }

    /// The apps `--app` names, each as `churnwatch.apps` spells it; none when none is named. An
    /// app not in the database is refused in one line (78) before anything is read or written.
    func named(_ store: DatabaseStore) async throws -> [String] {
        guard !apps.isEmpty else { return [] }
        return try selected(from: try await store.appsList()).map(\.bundleId)
    }

    /// The apps named, each checked against `churnwatch.apps`; every app when none is named.
    /// Bundle ids compare without case, as Apple's do: `--app COM.EXAMPLE.APP` is the app
    /// `com.example.app`, in the database's spelling.
    func selected(from all: [AppRecord]) throws -> [AppRecord] {
        guard !apps.isEmpty else { return all }
        return try apps.map { name in
            guard let app = AppRecord.named(name, in: all) else {
                let known = all.map(\.bundleId).joined(separator: ", ")
                throw CLIError.configuration("--app \(name.prefix(160)) is not an app of this database (apps: \(known.isEmpty ? "none" : known)); add it with `churnwatch apps add`")
            }
            return app
        }
    }
}

extension AppOptions {
    /// A reading command's stores, one per app it shows (``selected(from:)``: those named with
    /// `--app`, else every app, the default first), after the schema check. None when the
    /// database has no app yet (migrated without `APPSTORE_BUNDLE_ID`, none added): a store
    /// works for an app of `churnwatch.apps`, never for "no app".
    func readingStores(_ global: GlobalOptions, migrations: [String]? = nil) async throws -> [ChurnStore] {
        let database = DatabaseStore.open(try global.resolvedDatabaseURL())
        try await database.schemaCheck(migrations: migrations)
        return try selected(from: try await database.appsList()).map(database.scoped(to:))
    }

    /// The one line of a reading command on a database with no app yet.
    static let noAppsYet = CLIError.configuration("no apps in this database yet: set APPSTORE_BUNDLE_ID and run `churnwatch migrate`, or `churnwatch apps add`")

    /// The store of the one app a command works for (`single`), after the schema check
    /// (`migrations`: this build's, to refuse a schema behind or ahead of it). `marking`: a
    /// command that writes keeps the deployment's app (`APPSTORE_BUNDLE_ID`) the default app,
    /// adding it when missing, as `run` does; an app not in `churnwatch.apps` is refused.
    func singleStore(_ global: GlobalOptions, migrations: [String]? = nil, connections: Int = 1, marking: Bool = false) async throws -> ChurnStore {
        let database = DatabaseStore.open(try global.resolvedDatabaseURL(), connections: connections)
        try await database.schemaCheck(migrations: migrations)
        let name = try await single(database)
        if marking, name == Self.deploymentApp() { try await database.appsMarkDefault(name) }
        return try await database.app(name)
    }
}
