import Foundation

/// What a rate limiter answers to a request for a slot.
public enum RateLimitDecision: Hashable, Sendable {
    /// Send now (the limiter has already waited as needed).
    case proceed
    /// The next slot is at this time, later than the caller is willing to wait; nothing was reserved.
    case notBefore(Date)
}

/// A request budget per endpoint and environment, shared by every task that calls Apple.
///
/// The in-process implementation is ``TokenBucketRateLimiter``. A cross-process budget (for
/// example one kept in PostgreSQL, so several worker processes share Apple's per-app limit)
/// implements the same two calls.
public protocol AppStoreRateLimiter: Sendable {
    /// Waits for a slot for `key`, at most `maxWait` seconds. Returns ``RateLimitDecision/proceed``
    /// once the request may be sent, or ``RateLimitDecision/notBefore(_:)`` without waiting
    /// when the slot would come later than that. Throws `CancellationError` when cancelled.
    func acquire(_ key: RateLimitKey, maxWait: TimeInterval) async throws -> RateLimitDecision

    /// Apple answered 429 for `key` to a request sent at `sentAt`: send nothing before `until`
    /// (from `Retry-After`), then slow down for a while (``AdaptiveRate``: requests sent before
    /// the last slow-down belong to the burst it answered).
    func rateLimited(_ key: RateLimitKey, until: Date, sentAt: Date) async
}
