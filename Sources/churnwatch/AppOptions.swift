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
    func single(_ store: ChurnStore, _ env: [String: String] = ProcessInfo.processInfo.environment) async throws -> String {
        if apps.count > 1 { throw CLIError.configuration("this command works for one app at a time: give --app once") }
        if let app = try await named(store).first ?? Self.deploymentApp(env) { return app }
        if let app = try await store.appsList().first(where: \.isDefault) { return app.bundleId }
        throw CLIError.configuration("which app? set APPSTORE_BUNDLE_ID (the deployment's app) or give --app BUNDLE_ID")
    }

    /// The apps `--app` names, each as `churnwatch.apps` spells it; none when none is named. An
    /// app not in the database is refused in one line (78) before anything is read or written.
    func named(_ store: ChurnStore) async throws -> [String] {
        guard !apps.isEmpty else { return [] }
        return try selected(from: try await store.appsList()).map(\.bundleId)
    }

    /// The apps named, each checked against `churnwatch.apps`; every app when none is named.
    /// Bundle ids compare without case, as Apple's do: `--app COM.EXAMPLE.APP` is the app
    /// `com.example.app`, in the database's spelling.
    func selected(from all: [AppRecord]) throws -> [AppRecord] {
        guard !apps.isEmpty else { return all }
        return try apps.map { name in
            guard let app = all.first(where: { $0.bundleId == name }) ?? all.first(where: { AppRecord.sameBundleId($0.bundleId, name) }) else {
                let known = all.map(\.bundleId).joined(separator: ", ")
                throw CLIError.configuration("--app \(name.prefix(160)) is not an app of this database (apps: \(known.isEmpty ? "none" : known)); add it with `churnwatch apps add`")
            }
            return app
        }
    }
}

extension AppOptions {
    /// The apps a reading command shows: those named with `--app`, else every app in
    /// `churnwatch.apps` (the default first). A database from before apps were kept, or one
    /// nothing has configured yet, has none: then `APPSTORE_BUNDLE_ID`, if set.
    func forReading(_ store: ChurnStore) async throws -> [String] {
        let all = try await store.appsList()
        if all.isEmpty, apps.isEmpty { return Self.deploymentApp().map { [$0] } ?? [] }
        return try selected(from: all).map(\.bundleId)
    }
}

extension AppOptions {
    /// A reading command's stores, one per app it shows (`forReading`), after the schema check.
    /// A database with no app at all gives none, or with `orNoApp` one store of no app (`""`),
    /// whose reads find nothing: the command then says "no runs yet" or shows zeros, as it did
    /// before apps were kept.
    func readingStores(_ global: GlobalOptions, migrations: [String]? = nil, orNoApp: Bool = false) async throws -> [ChurnStore] {
        let all = ChurnStore.open(try global.resolvedDatabaseURL(), app: "")
        try await all.schemaCheck(migrations: migrations)
        let apps = try await forReading(all)
        return (orNoApp ? apps.nonEmpty : apps).map { all.scoped(to: $0) }
    }

    /// The store of the one app a command works for (`single`), after the schema check
    /// (`migrations`: this build's, to refuse a schema behind or ahead of it).
    func singleStore(_ global: GlobalOptions, migrations: [String]? = nil, connections: Int = 1) async throws -> ChurnStore {
        let store = ChurnStore.open(try global.resolvedDatabaseURL(), app: "", connections: connections)
        try await store.schemaCheck(migrations: migrations)
        return store.scoped(to: try await single(store))
    }
}
