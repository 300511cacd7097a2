import ArgumentParser
import ChurnStore
import Foundation
import Logging
import Synchronization

/// Options every command takes. Flags override environment variables.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: ArgumentHelp(
        "PostgreSQL connection string or postgresql:// URL (default: $DATABASE_URL).",
        valueName: "url"))
    var databaseURL: String?

    @Option(name: .customLong("log-format"), help: "Log format on stderr: text or json (default: text on a terminal, json otherwise).")
    var logFormat: LogFormat?

    @Option(name: .customLong("log-level"), help: "Least severe log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    /// The database URL from the flag or the environment; a configuration error when absent.
    /// A malformed one (not key=value pairs or a postgresql:// URL, a port that is not a number)
    /// is a configuration error naming the setting, told apart from a server that cannot be
    /// reached (69).
    func resolvedDatabaseURL(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        let (url, setting): (String, String)
        if let databaseURL, !databaseURL.isEmpty {
            (url, setting) = (databaseURL, "--database-url")
        } else if let env = environment["DATABASE_URL"], !env.isEmpty {
            (url, setting) = (env, "DATABASE_URL")
        } else {
            throw CLIError.configuration("DATABASE_URL is not set: pass --database-url or set DATABASE_URL to a libpq connection string")
        }
        if let problem = ChurnStore.connectionStringProblem(url) {
            throw CLIError.configuration("\(setting) is not a PostgreSQL connection string (\(problem)): use postgresql://user@host:port/db or host=... port=... dbname=...")
        }
        return url
    }

    /// Sets up logging once per process.
    func bootstrapLogging() {
        let format = logFormat ?? (isatty(STDERR_FILENO) == 1 ? .text : .json)
        let level = logLevel
        LoggingBootstrap.once(format: format, level: level)
    }
}

enum LogFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    case text, json
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

enum LoggingBootstrap {
    private static let done = Mutex(false)

    static func once(format: LogFormat, level: Logger.Level) {
        done.withLock { done in
            guard !done else { return }
            done = true
            bootstrap(format: format, level: level)
        }
    }

    private static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler
            switch format {
            case .text: handler = StreamLogHandler.standardError(label: label)
            case .json: handler = JSONLogHandler(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }
}
