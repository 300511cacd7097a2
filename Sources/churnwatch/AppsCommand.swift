import AppStoreServerAPI
import ArgumentParser
import ChurnStore
import Foundation

struct AppsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "The apps this database polls: add one, list them, change or remove one.",
        discussion: """
            The deployment's app (APPSTORE_BUNDLE_ID) is the default app; `migrate` and `run` add it. Another app \
            needs its bundle id and, in Production, its app Apple id; every other setting left out is the \
            deployment's (APPSTORE_*): one In-App Purchase key signs for every app of a team. A key of the app's \
            own is named by where it is (--key-file, or --key-env: a variable holding the PEM), never stored.

            `run`, `notifications sync` and the reading commands work on every app, or on those named with --app.

            Exit codes: 0 done; 78 a bad value, an app already added or not there; 64 a malformed command line; \
            69 database unreachable.
            """,
        subcommands: [Add.self, List.self, Set.self, Remove.self]
    )

    /// What `add` and `set` take; every option left out keeps its value (`set`) or the deployment's (`add`).
    struct Settings: ParsableArguments {
        @Argument(help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id"))
        var bundleId: String

        @Option(name: .customLong("app-apple-id"), help: ArgumentHelp("The app's Apple id (required in Production).", valueName: "id"))
        var appAppleId: Int64?

        @Option(name: .customLong("environment"), help: "Production or Sandbox (default: APPSTORE_ENVIRONMENT).")
        var environment: String?

        @Option(name: .customLong("issuer-id"), help: "The issuer id of the app's own key (default: the deployment's key).")
        var issuerId: String?

        @Option(name: .customLong("key-id"), help: "The key id of the app's own key.")
        var keyId: String?

        @Option(name: .customLong("key-file"), help: ArgumentHelp("Path of the app's own .p8 key.", valueName: "path"))
        var keyFile: String?

        @Option(name: .customLong("key-env"), help: ArgumentHelp("Name of an environment variable holding the app's own key (PEM).", valueName: "name"))
        var keyEnv: String?

        @Flag(name: .customLong("deployment-key"), help: "Forget the app's own key: use the deployment's (set only).")
        var deploymentKey = false

        @Option(name: .customLong("status-rate"), help: ArgumentHelp("Status calls a second for this app (default: the deployment's).", valueName: "rate"))
        var statusRate: Double?

        @Option(name: .customLong("history-rate"), help: ArgumentHelp("History calls a second for this app (default: the deployment's).", valueName: "rate"))
        var historyRate: Double?

        @Option(name: .customLong("notifications"), help: "on or off: this app's change feed (default: CHURNWATCH_NOTIFICATIONS).")
        var notifications: String?

        /// `record` with the options given applied, checked.
        func applied(to record: AppSettings) throws -> AppSettings {
            var r = record
            if let id = appAppleId {
                guard id > 0 else { throw CLIError.configuration("--app-apple-id \(id) is not an app Apple id (a positive integer)") }
                r.appAppleId = id
            }
            if let environment {
                guard ["Production", "Sandbox"].contains(environment) else {
                    throw CLIError.configuration("--environment \(environment.prefix(40)) is not Production or Sandbox")
                }
                r.environment = environment
            }
            let ownKey = issuerId != nil || keyId != nil || keyFile != nil || keyEnv != nil
            if deploymentKey {
                guard !ownKey else {
                    throw CLIError.configuration("--deployment-key forgets the app's own key: give it alone, or --issuer-id, --key-id and --key-file or --key-env for a key of its own")
                }
                (r.issuerId, r.keyId, r.keyFile, r.keyEnv) = (nil, nil, nil, nil)
            }
            if ownKey {
                guard let issuerId, let keyId, (keyFile == nil) != (keyEnv == nil) else {
                    throw CLIError.configuration("an app's own key needs --issuer-id, --key-id and one of --key-file or --key-env")
                }
                (r.issuerId, r.keyId, r.keyFile, r.keyEnv) = (issuerId, keyId, keyFile, keyEnv)
                if let keyFile {
                    // As every run will read it: a readable PEM P-256 private key (the .p8 file).
                    try AppStoreConfiguration.checkPrivateKeyFile(keyFile, setting: "--key-file")
                }
                if let keyEnv, keyEnv.range(of: "^[A-Za-z_][A-Za-z0-9_]*$", options: .regularExpression) == nil {
                    throw CLIError.configuration("--key-env \(keyEnv.prefix(40)) is not the name of an environment variable")
                }
            }
            for (flag, rate) in [("--status-rate", statusRate), ("--history-rate", historyRate)] {
                if let rate, !(rate >= 0.001 && rate <= 1_000_000) {
                    throw CLIError.configuration("\(flag) \(rate) is not a rate from 0.001 to 1000000 calls a second")
                }
            }
            r.statusRate = statusRate ?? r.statusRate
            r.historyRate = historyRate ?? r.historyRate
            if let notifications {
                guard let on = ["on": true, "off": false][notifications] else {
                    throw CLIError.configuration("--notifications \(notifications.prefix(40)) is not on or off")
                }
                r.notifications = on
            }
            return r
        }

        func checkedBundleId() throws -> String {
            guard bundleId.range(of: "^[A-Za-z0-9][A-Za-z0-9.-]{0,154}$", options: .regularExpression) != nil else {
                throw CLIError.configuration("\"\(bundleId.prefix(60))\" is not a bundle id (letters, digits, dots and hyphens)")
            }
            return bundleId
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an app to poll.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var settings: Settings

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let bundleId = try settings.checkedBundleId()
                let own = try settings.applied(to: AppSettings())
                let environment = own.environment ?? ProcessInfo.processInfo.environment["APPSTORE_ENVIRONMENT"] ?? "Production"
                if own.appAppleId == nil, environment.lowercased() == "production" {
                    throw CLIError.configuration("a Production app needs its app Apple id: give --app-apple-id (App Store Connect, App Information)")
                }
                let store = try await AppsCommand.store(global)
                let record = try await AppsCommand.saving { try await store.appsSave(bundleId, own, replace: false) }
                print("app added: \(record.bundleId) (\(AppsText.settings(record)))")
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change an app's settings (those given; the others stay).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var settings: Settings

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let store = try await AppsCommand.store(global)
                let name = try settings.checkedBundleId()
                guard let current = AppRecord.named(name, in: try await store.appsList()) else {
                    throw CLIError.configuration("no app \(name): add it with `churnwatch apps add` (`churnwatch apps list` shows the apps)")
                }
                let changed = try settings.applied(to: current.settings)
                let record = try await AppsCommand.saving { try await store.appsSave(current.bundleId, changed, replace: true) }
                print("app changed: \(record.bundleId) (\(AppsText.settings(record)))")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop polling an app. Its rows stay (readable by its bundle id); `apps add` brings it back.")

        @OptionGroup var global: GlobalOptions

        @Argument(help: ArgumentHelp("The app's bundle id.", valueName: "bundle-id"))
        var bundleId: String

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let store = try await AppsCommand.store(global)
                let name = AppRecord.named(bundleId, in: try await store.appsList())?.bundleId ?? bundleId
                try await AppsCommand.saving { try await store.appsRemove(name) }
                print("app removed: \(name) (its rows stay)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the apps, the default first (--json: one object per line).")

        @OptionGroup var global: GlobalOptions

        @Flag(name: .customLong("json"), help: "One JSON object per app.")
        var json = false

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let store = try await AppsCommand.store(global)
                let apps = try await store.appsList()
                if json {
                    for app in apps { print(try JSONOutput.line(AppJSON(app))) }
                } else if apps.isEmpty {
                    print("no apps yet: set APPSTORE_BUNDLE_ID and run `churnwatch migrate`, or `churnwatch apps add`")
                } else {
                    for app in apps { print("\(app.bundleId)\(app.isDefault ? " (default)" : ""): \(AppsText.settings(app))") }
                }
            }
        }
    }

    static func store(_ global: GlobalOptions) async throws -> DatabaseStore {
        let store = DatabaseStore.open(try global.resolvedDatabaseURL())
        try await store.schemaCheck(migrations: BuildMigrations.names())
        return store
    }

    /// A refusal of the store's (already there, not there, the default app) is bad input: 78.
    static func saving<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as AppsError {
            throw CLIError.configuration(e.description)
        }
    }
}

enum AppsText {
    /// The settings of an app in one phrase; "as the deployment" for those it takes from APPSTORE_*.
    static func settings(_ a: AppRecord) -> String {
        var parts: [String] = []
        parts.append("app Apple id " + (a.appAppleId.map(String.init) ?? "as the deployment"))
        parts.append("environment " + (a.environment ?? "as the deployment"))
        if let keyId = a.keyId {
            parts.append("own key \(keyId) from " + (a.keyFile.map { "file \($0)" } ?? "$\(a.keyEnv ?? "")"))
        } else {
            parts.append("the deployment's key")
        }
        if let r = a.statusRate { parts.append("status rate \(r)/s") }
        if let r = a.historyRate { parts.append("history rate \(r)/s") }
        if let n = a.notifications { parts.append("notifications \(n ? "on" : "off")") }
        return parts.joined(separator: ", ")
    }
}

struct AppJSON: Encodable {
    var bundle_id: String, is_default: Bool, app_apple_id: Int64?, environment: String?
    var issuer_id: String?, key_id: String?, key_file: String?, key_env: String?
    var status_rate: Double?, history_rate: Double?, notifications: Bool?

    init(_ a: AppRecord) {
        (bundle_id, is_default, app_apple_id, environment) = (a.bundleId, a.isDefault, a.appAppleId, a.environment)
        (issuer_id, key_id, key_file, key_env) = (a.issuerId, a.keyId, a.keyFile, a.keyEnv)
        (status_rate, history_rate, notifications) = (a.statusRate, a.historyRate, a.notifications)
    }
}
