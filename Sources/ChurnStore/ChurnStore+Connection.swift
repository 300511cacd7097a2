import Foundation
import Postgres

extension ChurnStore {
    /// What is wrong with a connection string (not key=value pairs or a `postgresql://` URL, a
    /// port that is not a number), or nil when it can be tried.
    public static func connectionStringProblem(_ connectionString: String) -> String? {
        PostgresConnectionString.problem(connectionString)
    }
}

/// How long and how often ``ChurnStore/withReconnect(policy:onRetry:_:)`` tries again while
/// PostgreSQL is away.
public struct DatabaseRetryPolicy: Sendable, Equatable {
    /// Seconds before the second attempt; doubled for each further one.
    public var initialDelay: TimeInterval
    /// The longest wait between two attempts, in seconds.
    public var maxDelay: TimeInterval
    /// Seconds after the first failure after which no further attempt starts.
    public var budget: TimeInterval

    public init(initialDelay: TimeInterval = 0.1, maxDelay: TimeInterval = 5, budget: TimeInterval = 120) {
        let policy = PostgresReconnectPolicy(initialDelay: initialDelay, maxDelay: maxDelay, budget: budget)
        self.initialDelay = policy.initialDelay
        self.maxDelay = policy.maxDelay
        self.budget = policy.budget
    }

    var postgres: PostgresReconnectPolicy {
        PostgresReconnectPolicy(initialDelay: initialDelay, maxDelay: maxDelay, budget: budget)
    }
}

/// PostgreSQL could not be reached, or a connection to it broke: worth trying again later, on a
/// new connection. (An error the server reports on a working connection is not one.)
public struct DatabaseConnectionProblem: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Could not connect: unreachable, refused, or a wrong user or password.
        case connectFailed
        /// A connection broke mid-way (a restart, a terminated backend), or the retries of
        /// ``ChurnStore/withReconnect(policy:onRetry:_:)`` ran out.
        case lost
    }

    public var kind: Kind
    public var message: String

    /// The problem `error` is, or nil when it is not about reaching PostgreSQL.
    public init?(_ error: any Error) {
        guard let error = error as? PostgresError, error.isConnectionProblem else { return nil }
        kind = error.kind == .connectionFailed ? .connectFailed : .lost
        message = error.message
    }

    /// An error that reads as a lost connection (so that ``ChurnStore/withReconnect(policy:onRetry:_:)``
    /// tries the step again): for a step that found out on its own that the database is not back.
    public static func lostError(_ message: String) -> any Error {
        PostgresError(kind: .connectionLost, message: message)
    }
}

extension ChurnStore {
    /// Runs `operation` (a step of this store, or several) and, while it fails because
    /// PostgreSQL went away (a dropped connection, a restart, a server that does not answer
    /// yet), runs it again after a capped exponential backoff, for at most `policy.budget`
    /// seconds after the first such failure. Any other error is thrown at once. `operation`
    /// must be safe to run again: after a lost connection it may or may not have committed.
    ///
    /// - Parameter onRetry: told about each failure that will be retried (its message), with the
    ///   wait before the next attempt (for a log line).
    /// - Throws: the operation's error; when the budget is used up, a lost connection
    ///   (``DatabaseConnectionProblem``) saying for how long PostgreSQL was unreachable;
    ///   `CancellationError` when the task is cancelled while waiting.
    public func withReconnect<T: Sendable>(
        policy: DatabaseRetryPolicy = DatabaseRetryPolicy(),
        onRetry: (@Sendable (String, TimeInterval) -> Void)? = nil,
        _ operation: @Sendable () async throws -> T
    ) async throws -> T {
        let told: (@Sendable (PostgresError, TimeInterval) -> Void)? = onRetry.map { onRetry in
            { @Sendable error, delay in onRetry(error.message, delay) }
        }
        return try await pool.withReconnect(policy: policy.postgres, onRetry: told, operation)
    }
}
