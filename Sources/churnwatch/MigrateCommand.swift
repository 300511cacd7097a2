import ArgumentParser
import ChurnStore
import Foundation
import Logging

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending schema migrations (idempotent, safe to run concurrently).",
        discussion: """
            Refuses, with exit 78, when a migration that was already applied has changed on disk. The schema is every \
            app's (no --app); APPSTORE_BUNDLE_ID is the default app, and migration 0018 gives it the rows already there.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(name: .customLong("status"), help: "List applied and pending migrations; change nothing.")
    var statusOnly = false

    @Option(name: .customLong("migrations-dir"), help: "Directory of NNNN_name.sql files (default: $CHURNWATCH_MIGRATIONS_DIR, or sql/migrations found next to the binary).")
    var migrationsDir: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let env = ProcessInfo.processInfo.environment
            let url = try global.resolvedDatabaseURL(env)
            let directory = Migrator.locateDirectory(explicit: migrationsDir, environment: env, executable: CommandLine.arguments[0])
            // The deployment's app: migration 0018 gives it the rows already here, and it is the default app.
            let migrator = Migrator(migrations: try Migrator.load(directory: directory), logger: Logger(label: "churnwatch.migrate"),
                                    defaultBundleId: AppOptions.deploymentApp(env))
            let databaseLogger = Logger(label: "churnwatch.postgres")
            if statusOnly {
                let statuses = try migrator.status(connectionString: url, databaseLogger: databaseLogger)
                let width = max(8, statuses.map(\.state.rawValue.count).max() ?? 0)
                for s in statuses {
                    let when = s.appliedAt.map { " \($0.ISO8601Format())" } ?? ""
                    print("\(s.state.rawValue.padding(toLength: width, withPad: " ", startingAt: 0)) \(s.name)\(when)")
                }
                return
            }
            let applied = try migrator.migrate(connectionString: url, databaseLogger: databaseLogger)
            if applied.isEmpty {
                print("schema is up to date (\(migrator.migrations.count) migrations applied)")
            } else {
                print("applied \(applied.count) migration\(applied.count == 1 ? "" : "s"): \(applied.joined(separator: ", "))")
            }
        }
    }
}

/// The migration file names of this build (`sql/migrations`, found as `migrate` finds it), for
/// the schema check of the commands that write: nil when the directory cannot be read (an
/// installation without it), and then only a missing schema is noticed.
enum BuildMigrations {
    static func names(environment: [String: String] = ProcessInfo.processInfo.environment) -> [String]? {
        let directory = Migrator.locateDirectory(explicit: nil, environment: environment, executable: CommandLine.arguments[0])
        return (try? Migrator.load(directory: directory))?.map(\.name)
    }
}
