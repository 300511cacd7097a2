import Foundation

/// An in-process token bucket per endpoint and environment, shared by every task.
///
/// Slots are handed out in order and spaced evenly at the configured rate (a "virtual
/// scheduling" token bucket holding `burst` tokens), so calls spread over time instead of
/// bursting into Apple's hourly budget. A 429 pauses the key until its `Retry-After` and halves
/// its rate (down to `minimumRateFactor`) until `slowdown` seconds after the pause ends; the
/// rate then returns to normal. All timing goes through the injected clock.
public actor TokenBucketRateLimiter: AppStoreRateLimiter {
    private struct Bucket {
        /// When the next slot would be if no burst allowance were left ("theoretical arrival time").
        var nextSlot: Date
        var pausedUntil: Date = .distantPast
        var rateFactor: Double = 1
        var slowUntil: Date = .distantPast
    }

    private let limits: AppStoreRateLimits
    private let burst: Double
    private let clock: any AppStoreClock
    private let slowdown: TimeInterval
    private let minimumRateFactor: Double
    private var buckets: [RateLimitKey: Bucket] = [:]

    /// - Parameters:
    ///   - limits: requests per second per endpoint and environment.
    ///   - burst: slots that may be used back to back after an idle period (at least 1).
    ///   - slowdown: seconds after a 429's `Retry-After` during which the rate stays reduced.
    ///   - minimumRateFactor: the lowest fraction of the configured rate repeated 429s lead to.
    public init(
        limits: AppStoreRateLimits, burst: Double = 1, clock: any AppStoreClock = SystemClock(),
        slowdown: TimeInterval = 300, minimumRateFactor: Double = 0.125
    ) {
        self.limits = limits
        self.burst = max(1, burst)
        self.clock = clock
        self.slowdown = slowdown
        self.minimumRateFactor = minimumRateFactor
    }

    public func acquire(_ key: RateLimitKey, maxWait: TimeInterval) async throws -> RateLimitDecision {
        while true {
            let now = clock.now()
            var bucket = buckets[key] ?? Bucket(nextSlot: now)
            if now > bucket.slowUntil { bucket.rateFactor = 1 }
            let interval = 1 / (limits.perSecond(key) * bucket.rateFactor)
            let earliest = max(now, bucket.pausedUntil)
            let start = max(earliest, bucket.nextSlot.addingTimeInterval(-(burst - 1) * interval))
            if start.timeIntervalSince(now) > maxWait {
                buckets[key] = bucket
                return .notBefore(start)
            }
            bucket.nextSlot = max(bucket.nextSlot, start).addingTimeInterval(interval)
            buckets[key] = bucket
            if start > now { try await clock.sleep(until: start) }
            // A 429 that arrived while this task waited moves its slot behind the pause.
            if let paused = buckets[key]?.pausedUntil, paused > clock.now() { continue }
            return .proceed
        }
    }

    public func rateLimited(_ key: RateLimitKey, until: Date) {
        let now = clock.now()
        var bucket = buckets[key] ?? Bucket(nextSlot: now)
        bucket.pausedUntil = max(bucket.pausedUntil, until)
        bucket.nextSlot = max(bucket.nextSlot, until)
        bucket.rateFactor = max(minimumRateFactor, (now > bucket.slowUntil ? 1 : bucket.rateFactor) / 2)
        bucket.slowUntil = bucket.pausedUntil.addingTimeInterval(slowdown)
        buckets[key] = bucket
    }

    /// The current requests per second for `key`, after any 429 slowdown.
    public func currentRate(_ key: RateLimitKey) -> Double {
        let bucket = buckets[key]
        let factor = (bucket.map { clock.now() > $0.slowUntil } ?? true) ? 1 : bucket!.rateFactor
        return limits.perSecond(key) * factor
    }
}
