@testable import AppStoreServerAPI
import Foundation
import Testing

@Suite("Token bucket limiter on virtual time")
struct TokenBucketRateLimiterTests {
    let clock = TestClock()
    let key = RateLimitKey(.subscriptionStatuses, .production)
    var limits: AppStoreRateLimits {
        var l = AppStoreRateLimits.apple
        l.production[.subscriptionStatuses] = 10
        return l
    }

    @Test func slotsAreSpacedEvenly() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock)
        let start = clock.now()
        var times: [TimeInterval] = []
        for _ in 0..<5 {
            #expect(try await limiter.acquire(key, maxWait: 60) == .proceed)
            times.append(clock.now().timeIntervalSince(start))
        }
        for (got, want) in zip(times, [0, 0.1, 0.2, 0.3, 0.4]) { #expect(abs(got - want) < 1e-6) }
    }

    @Test func sharedAcrossConcurrentTasks() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock)
        let start = clock.now()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { _ = try? await limiter.acquire(key, maxWait: 60) } }
        }
        // 20 slots at 10/s: the last one is 1.9 s after the first.
        #expect(abs(clock.now().timeIntervalSince(start) - 1.9) < 1e-6)
    }

    @Test func pauseUntilRetryAfterThenSlowerThenBackWithinSeconds() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock)
        _ = try await limiter.acquire(key, maxWait: 60)
        let until = clock.now().addingTimeInterval(5)
        await limiter.rateLimited(key, until: until, sentAt: clock.now())
        #expect(await limiter.currentRate(key) == 5)
        #expect(try await limiter.acquire(key, maxWait: 1) == .notBefore(until))
        #expect(try await limiter.acquire(key, maxWait: 60) == .proceed)
        #expect(clock.now() == until)
        _ = try await limiter.acquire(key, maxWait: 60)
        #expect(abs(clock.now().timeIntervalSince(until) - 0.2) < 1e-6) // half rate
        // Another endpoint is not affected.
        #expect(await limiter.currentRate(RateLimitKey(.transactionHistory, .production)) == 50)
        // Within seconds of sending again, the full rate is back (not minutes).
        clock.advance(by: 3.2)
        #expect(await limiter.currentRate(key) == 10)
    }

    @Test func aBurstOfConcurrent429sIsOneSignal() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock)
        // 17 requests in flight together all come back 429 within one round trip.
        let sent = clock.now()
        clock.advance(by: 0.01)
        for _ in 0..<17 {
            await limiter.rateLimited(key, until: clock.now().addingTimeInterval(0.05), sentAt: sent)
            clock.advance(by: 0.001)
        }
        #expect(await limiter.currentRate(key) == 5, "one burst halves the rate once")
    }

    @Test func repeated429sSpreadOverTimeLowerTheRateToAFloor() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock, backoff: AdaptiveRate(minimumFactor: 0.25))
        for _ in 0..<5 {
            await limiter.rateLimited(key, until: clock.now(), sentAt: clock.now())
            clock.advance(by: 1)
        }
        #expect(abs(await limiter.currentRate(key) - 2.5 * 1.25) < 1e-9, "floored at a quarter, one second of recovery since")
    }

    @Test func sandboxDefaultsAreTenPercent() {
        #expect(AppStoreRateLimits.apple.perSecond(RateLimitKey(.subscriptionStatuses, .sandbox)) == 5)
        #expect(AppStoreRateLimits.apple.perSecond(RateLimitKey(.refundHistory, .production)) == 10)
        #expect(AppStoreRateLimits.apple.perSecond(RateLimitKey(.refundHistory, .sandbox)) == 1)
    }
}
