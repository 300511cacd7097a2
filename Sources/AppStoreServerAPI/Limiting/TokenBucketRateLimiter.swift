import Foundation

/// An in-process token bucket per endpoint and environment, shared by every task.
///
/// Slots are handed out in order and spaced evenly at the configured rate (a "virtual
/// scheduling" token bucket holding `burst` tokens), so calls spread over time instead of
/// bursting into Apple's hourly budget. A 429 pauses the key until its `Retry-After` and slows
/// it by the rules of ``AdaptiveRate``: one cut per burst of 429s, recovery to the configured
/// rate within seconds. All timing goes through the injected clock.
public actor TokenBucketRateLimiter: AppStoreRateLimiter {
    private struct Bucket {
        /// When the next slot would be if no burst allowance were left ("theoretical arrival time").
        var nextSlot: Date
        var pausedUntil: Date = .distantPast
        var rate: AdaptiveRate
    }

    private let limits: AppStoreRateLimits
    private let burst: Double
    private let clock: any AppStoreClock
    private let backoff: AdaptiveRate
    private var buckets: [RateLimitKey: Bucket] = [:]

    /// - Parameters:
    ///   - limits: requests per second per endpoint and environment.
    ///   - burst: slots that may be used back to back after an idle period (at least 1).
    ///   - backoff: how 429s slow a key down and how it recovers.
    public init(
        limits: AppStoreRateLimits, burst: Double = 1, clock: any AppStoreClock = SystemClock(),
        backoff: AdaptiveRate = AdaptiveRate()
    ) {
        self.limits = limits
        self.burst = max(1, burst)
        self.clock = clock
        self.backoff = backoff
    }

    public func acquire(_ key: RateLimitKey, maxWait: TimeInterval) async throws -> RateLimitDecision {
        while true {
            let now = clock.now()
            var bucket = buckets[key] ?? Bucket(nextSlot: now, rate: backoff)
            let interval = 1 / (limits.perSecond(key) * bucket.rate.factor(at: now))
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

    public func rateLimited(_ key: RateLimitKey, until: Date, sentAt: Date) {
        let now = clock.now()
        var bucket = buckets[key] ?? Bucket(nextSlot: now, rate: backoff)
        bucket.pausedUntil = max(bucket.pausedUntil, until)
        bucket.nextSlot = max(bucket.nextSlot, until)
        bucket.rate.rateLimited(at: now, sentAt: sentAt, pausedUntil: bucket.pausedUntil)
        buckets[key] = bucket
    }

    /// The current requests per second for `key`, after any 429 slowdown.
    public func currentRate(_ key: RateLimitKey) -> Double {
        limits.perSecond(key) * (buckets[key]?.rate.factor(at: clock.now()) ?? 1)
    }
}
