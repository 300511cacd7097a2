import Foundation

/// Retries with exponential backoff and full jitter, bounded in attempts and in total wait.
///
/// Attempt *n* (1-based) that fails temporarily waits a uniformly random time in
/// `[0, min(maxDelay, baseDelay · 2^(n-1))]` before attempt *n*+1. Waiting stops when
/// `maxAttempts` is reached or the next wait would push the total time spent waiting (backoff,
/// `Retry-After` and rate limiter) past `maxTotalWait`.
public struct RetryPolicy: Hashable, Sendable {
    public var maxAttempts: Int
    /// Seconds.
    public var baseDelay: TimeInterval
    /// Seconds.
    public var maxDelay: TimeInterval
    /// Seconds a single call may spend waiting in total.
    public var maxTotalWait: TimeInterval

    public init(maxAttempts: Int = 5, baseDelay: TimeInterval = 0.5, maxDelay: TimeInterval = 20, maxTotalWait: TimeInterval = 60) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxTotalWait = maxTotalWait
    }

    /// The backoff ceiling after failed attempt `attempt` (1-based).
    public func ceiling(afterAttempt attempt: Int) -> TimeInterval {
        min(maxDelay, baseDelay * pow(2, Double(max(0, attempt - 1))))
    }

    /// The pause a 429's `Retry-After` (`asked`) may impose at `now`: at most `maxTotalWait`
    /// (`APPSTORE_MAX_RETRY_WAIT`), so a server's far-future value (a clock error, a hostile or
    /// broken server) cannot stall a run, nor, stored in the shared budget, every later one.
    public func pause(retryAfter asked: Date, now: Date) -> (until: Date, capped: Bool) {
        let cap = now.addingTimeInterval(maxTotalWait)
        return asked > cap ? (cap, true) : (asked, false)
    }

    /// The delay after failed attempt `attempt`, given `unit` uniformly drawn from [0, 1).
    public func delay(afterAttempt attempt: Int, unit: Double) -> TimeInterval {
        ceiling(afterAttempt: attempt) * min(max(unit, 0), 1)
    }
}
