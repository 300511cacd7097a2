import AppStoreServerAPI
import ArgumentParser
import ChurnInput
import ChurnModel
import ChurnStore
import Foundation
import Polling

/// churnwatch's exit codes (docs/contracts.md), as operators and cron wrappers read them.
enum ExitStatus {
    /// Done.
    static let ok: Int32 = 0
    /// A bug.
    static let bug: Int32 = 1
    /// A dependency (database, Apple) unreachable at start (EX_UNAVAILABLE).
    static let unavailable: Int32 = 69
    /// Stopped early but resumable: SIGTERM, time budget, Apple unavailable (EX_TEMPFAIL).
    static let resumable: Int32 = 75
    /// A command line the parser rejects (EX_USAGE).
    static let usage: Int32 = 64
    /// Bad configuration (EX_CONFIG).
    static let configuration: Int32 = 78
    /// An input that is unusable: a file with nothing to import or ingest, ids not settled
    /// (EX_DATAERR).
    static let dataError: Int32 = 65
}

extension RunStop {
    /// The exit code of a run, backfill or sync that stopped this way: the one table of them
    /// (docs/contracts.md, "Exit codes"). A rejected key is configuration to fix; a server
    /// that is not trusted, a dependency to check; the rest resume by themselves.
    var exitStatus: Int32 {
        switch self {
        case .signal, .timeBudget, .appleUnavailable, .database, .internalError: ExitStatus.resumable
        case .keyRefused: ExitStatus.configuration
        case .untrustedServer: ExitStatus.unavailable
        }
    }
}

/// An error the CLI reports in one line with a chosen exit code.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    var exitCode: Int32

    static func configuration(_ message: String) -> CLIError { CLIError(description: message, exitCode: ExitStatus.configuration) }
    static func unavailable(_ message: String) -> CLIError { CLIError(description: message, exitCode: ExitStatus.unavailable) }
    static func resumable(_ message: String) -> CLIError { CLIError(description: message, exitCode: ExitStatus.resumable) }
}

/// Runs a command body and turns every error into one line on stderr and an exit code.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ExitCode {
        throw error
    } catch let error as CleanExit {
        throw error
    } catch {
        let (message, code) = classify(error)
        FileHandle.standardError.write(Data("churnwatch: \(message)\n".utf8))
        throw ExitCode(code)
    }
}

func classify(_ error: any Error) -> (String, Int32) {
    switch error {
    case let e as CLIError:
        return (e.description, e.exitCode)
    case let e where DatabaseConnectionProblem(e)?.kind == .connectFailed:
        // Unreachable, refused, or a wrong user or password: the setting to check is named.
        return ("DATABASE_URL: \(DatabaseConnectionProblem(e)?.message ?? "\(e)")", ExitStatus.unavailable)
    case let e where DatabaseConnectionProblem(e)?.kind == .lost:
        return ("lost the PostgreSQL connection: \(DatabaseConnectionProblem(e)?.message ?? "\(e)") (re-run to resume)", ExitStatus.resumable)
    case let e as MigrationError:
        return (e.description, ExitStatus.configuration)
    case let e as SchemaError:
        return (e.description, ExitStatus.configuration)
    case let e as ConfigurationError:
        return (e.description, ExitStatus.configuration)
    case let e as ImportFileError:
        // An input file that cannot be read (import, notifications ingest): one line, nothing written.
        return (e.description, ExitStatus.dataError)
    case let e as AppsError:
        // A setting that names an app otherwise than the database does.
        return (e.description, ExitStatus.configuration)
    case let e as WebhookError:
        return (e.description, ExitStatus.configuration)
    case let e as ExperimentError:
        return (e.description, ExitStatus.configuration)
    case let e as FeedSync.FeedConflict:
        return (e.description, ExitStatus.resumable)
    default:
        return ("internal error: \(error)", ExitStatus.bug)
    }
}
