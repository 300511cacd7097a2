import ChurnStore

/// Why work on a run stopped before nothing was left: the one vocabulary of a run's stop, from
/// the rules that decide it (``RunMachine``) to the outcome (``RunOutcome/stopped(runId:_:)``)
/// and the CLI's exit code (one table, docs/contracts.md). Every case leaves the run resumable.
public enum RunStop: Sendable, Equatable {
    /// On request: a signal, the time budget, an internal error (the text says which).
    case requested(String)
    /// Apple did not answer for longer than the retry budget (5xx, timeouts, rate limits).
    case appleUnavailable(String)
    /// Apple rejected the API key.
    case unauthorized
    /// The server's TLS certificate was not trusted (the text says whose and why).
    case untrustedServer(String)
    /// PostgreSQL stayed away longer than the retry budget.
    case databaseUnavailable(String)

    /// The stop a failure of the whole run brings; nil for a subscription's own failure, after
    /// which the run goes on.
    public init?(_ scope: ItemFailureClass.Scope, detail: String) {
        switch scope {
        case .subscription: return nil
        case .appleUnavailable: self = .appleUnavailable(detail)
        case .unauthorized: self = .unauthorized
        case .untrustedServer: self = .untrustedServer(detail)
        }
    }

    /// The stop in words, as logs and progress say it.
    public var reason: String {
        switch self {
        case .requested(let why): why
        case .appleUnavailable(let detail), .untrustedServer(let detail): detail
        case .unauthorized: "Apple rejected the API key"
        case .databaseUnavailable(let detail): "PostgreSQL unavailable: \(detail)"
        }
    }

    /// A short name for logs and metrics.
    public var label: String {
        switch self {
        case .requested: "interrupted"
        case .appleUnavailable: "apple_unavailable"
        case .unauthorized: "unauthorized"
        case .untrustedServer: "untrusted_server"
        case .databaseUnavailable: "database_unavailable"
        }
    }
}
