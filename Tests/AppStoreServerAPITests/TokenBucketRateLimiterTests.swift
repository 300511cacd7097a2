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

    @Test func pauseUntilRetryAfterThenSlower() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock, slowdown: 60)
        _ = try await limiter.acquire(key, maxWait: 60)
        let until = clock.now().addingTimeInterval(5)
        await limiter.rateLimited(key, until: until)
        #expect(await limiter.currentRate(key) == 5)
        #expect(try await limiter.acquire(key, maxWait: 1) == .notBefore(until))
        #expect(try await limiter.acquire(key, maxWait: 60) == .proceed)
        #expect(clock.now() == until)
        _ = try await limiter.acquire(key, maxWait: 60)
        #expect(abs(clock.now().timeIntervalSince(until) - 0.2) < 1e-6) // half rate
        // Another endpoint is not affected.
        #expect(await limiter.currentRate(RateLimitKey(.transactionHistory, .production)) == 50)
        // After the slowdown the full rate returns.
        clock.advance(by: 61)
        #expect(await limiter.currentRate(key) == 10)
    }

    @Test func repeated429sLowerTheRateToAFloor() async throws {
        let limiter = TokenBucketRateLimiter(limits: limits, clock: clock, minimumRateFactor: 0.25)
        for _ in 0..<5 { await limiter.rateLimited(key, until: clock.now().addingTimeInterval(1)) }
        #expect(await limiter.currentRate(key) == 2.5)
    }

    @Test func sandboxDefaultsAreTenPercent() {
        #expect(AppStoreRateLimits.apple.perSecond(RateLimitKey(.subscriptionStatuses, .sandbox)) == 5)
        #expect(AppStoreRateLimits.apple.perSecond(RateLimitKey(.refundHistory, .production)) == 10)
        #expect(AppStoreRateLimits.apple.perSecond(RateLimitKey(.refundHistory, .sandbox)) == 1)
    }
}
