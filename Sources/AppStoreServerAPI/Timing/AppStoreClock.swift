import Foundation

/// Wall-clock time and waiting, injected so tests advance time instead of sleeping.
///
/// Wall-clock (not monotonic) because the inputs are wall-clock: JWT `iat`/`exp`, `Retry-After`
/// as epoch milliseconds, `signedDate`.
public protocol AppStoreClock: Sendable {
    /// The current time.
    func now() -> Date
    /// Suspends until `deadline` (returns at once if it has passed). Throws `CancellationError`
    /// when the task is cancelled.
    func sleep(until deadline: Date) async throws
}

/// The real clock.
public struct SystemClock: AppStoreClock {
    public init() {}
    public func now() -> Date { Date() }
    public func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSinceNow
        guard seconds > 0 else { return try Task.checkCancellation() }
        try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
    }
}
