import Foundation

/// Why work stopped before nothing was left: the one value of a stop, for every part that
/// stops (a run's lanes, the change feed's sync, the refund answers, prune) and every caller
/// that reports one (the run's outcome, the CLI's line and exit code: one table,
/// docs/contracts.md). Every case leaves the work resumable.
public enum RunStop: Sendable, Equatable {
    /// A signal (SIGTERM, SIGINT) asked for it.
    case signal
    /// The invocation's time budget (`--max-duration`) is used up.
    case timeBudget
    /// Apple did not answer (5xx, timeouts) for longer than the retry budget, or
    /// (`rateLimited`) kept answering 429 past it.
    case appleUnavailable(String, rateLimited: Bool)
    /// Apple refused the API key (the detail says where: a poll, a history page, an answer).
    case keyRefused(String)
    /// The server's TLS certificate is not trusted (whose and why).
    case untrustedServer(String)
    /// PostgreSQL stayed away longer than the retry budget.
    case database(String)
    /// A bug in churnwatch (a lane ended in an error it did not expect).
    case internalError(String)

    /// The stop a failure of this scope brings (``ItemFailureClass/Scope``, the one mapping); nil
    /// for a subscription's own failure, after which the work goes on.
    public init?(_ scope: ItemFailureClass.Scope, detail: String) {
        switch scope {
        case .subscription: return nil
        case .appleUnavailable: self = .appleUnavailable(detail, rateLimited: false)
        case .rateLimited: self = .appleUnavailable(detail, rateLimited: true)
        case .unauthorized: self = .keyRefused(detail)
        case .untrustedServer: self = .untrustedServer(detail)
        }
    }

    /// Asked for from outside (a signal, the time budget): the whole invocation stops. The rest
    /// are failures.
    public var isAskedFor: Bool {
        switch self {
        case .signal, .timeBudget: true
        default: false
        }
    }

    /// Nothing sent to Apple can succeed until an operator fixes it (the key, the server's
    /// certificate): nothing more is tried, whichever endpoint or environment is next.
    public var refusesEveryCall: Bool {
        switch self {
        case .keyRefused, .untrustedServer: true
        default: false
        }
    }

    /// The stop in words, as logs, progress and the run's line say it.
    public var reason: String {
        switch self {
        case .signal: "signal"
        case .timeBudget: "time budget (--max-duration) used up"
        case .appleUnavailable(let detail, _), .untrustedServer(let detail), .internalError(let detail): detail
        case .keyRefused: "Apple rejected the API key"
        case .database(let detail): "PostgreSQL unavailable: \(detail)"
        }
    }

    /// The failure's own words (a refused key's: where and how it was refused).
    public var detail: String {
        if case .keyRefused(let detail) = self { return detail }
        return reason
    }

    /// A short name for logs and metrics (`outcome` label values: unchanged since before the
    /// stop was one value).
    public var label: String {
        switch self {
        case .signal, .timeBudget, .internalError: "interrupted"
        case .appleUnavailable: "apple_unavailable"
        case .keyRefused: "unauthorized"
        case .untrustedServer: "untrusted_server"
        case .database: "database_unavailable"
        }
    }

    /// The same stop with its detail prefixed (which history, which part).
    public func prefixed(_ prefix: String) -> RunStop {
        guard !prefix.isEmpty else { return self }
        return switch self {
        case .signal, .timeBudget: self
        case .appleUnavailable(let d, let limited): .appleUnavailable(prefix + d, rateLimited: limited)
        case .keyRefused(let d): .keyRefused(prefix + d)
        case .untrustedServer(let d): .untrustedServer(prefix + d)
        case .database(let d): .database(prefix + d)
        case .internalError(let d): .internalError(prefix + d)
        }
    }
}

/// An invocation's time budget (`--max-duration`) and shutdown grace, counted from its start:
/// the one computation of when work must stop and when work still in flight is abandoned.
public struct StopBudget: Sendable, Equatable {
    public var startedAt: Date
    /// nil: no budget.
    public var maxDuration: TimeInterval?
    /// After a stop, in-flight work gets this long before it is abandoned.
    public var grace: TimeInterval

    public init(startedAt: Date, maxDuration: TimeInterval?, grace: TimeInterval) {
        self.startedAt = startedAt
        self.maxDuration = maxDuration
        self.grace = max(0, grace)
    }

    /// When the budget is used up (nil: never).
    public var deadline: Date? { maxDuration.map { startedAt.addingTimeInterval($0) } }

    /// The budget is used up at `now`.
    public func usedUp(at now: Date) -> Bool { deadline.map { now >= $0 } ?? false }

    /// When work in flight at a stop asked at `stoppedAt` is abandoned.
    public func abandonAt(stoppedAt: Date) -> Date { stoppedAt.addingTimeInterval(grace) }
}
