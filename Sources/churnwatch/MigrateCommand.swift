import ArgumentParser
import ChurnStore
import Foundation
import Logging
import Postgres

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply pending schema migrations (idempotent, safe to run concurrently).",
        discussion: "Refuses, with exit 78, when a migration that was already applied has changed on disk."
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
            let migrator = Migrator(migrations: try Migrator.load(directory: directory), logger: Logger(label: "churnwatch.migrate"))
            let db = try PostgresConnection(connectionString: url, logger: Logger(label: "churnwatch.postgres"))
            if statusOnly {
                for s in try migrator.status(db) {
                    let when = s.appliedAt.map { " \($0.ISO8601Format())" } ?? ""
                    print("\(s.state.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(s.name)\(when)")
                }
                return
            }
            let applied = try migrator.migrate(db)
            if applied.isEmpty {
                print("schema is up to date (\(migrator.migrations.count) migrations applied)")
            } else {
                print("applied \(applied.count) migration\(applied.count == 1 ? "" : "s"): \(applied.joined(separator: ", "))")
            }
        }
    }
}
