import AppStoreServerAPI
import ChurnStore
import Foundation

/// Apple's per-app budget shared by every process working a run: tokens come from a bucket
/// row in PostgreSQL (`churnwatch.api_budget`), a few at a time, and each process spaces its
/// own calls evenly with an in-process bucket. The sum over all processes never exceeds the
/// configured rate; one process alone uses all of it.
public actor SharedBudgetLimiter: AppStoreRateLimiter {
    private let store: ChurnStore
    private let limits: AppStoreRateLimits
    private let local: TokenBucketRateLimiter
    private let clock: any AppStoreClock
    private let namespace: String
    private var stash: [RateLimitKey: Int] = [:]

    /// - Parameters:
    ///   - namespace: what the budget belongs to (the app's bundle id): apps have separate budgets.
    public init(store: ChurnStore, limits: AppStoreRateLimits, namespace: String, clock: any AppStoreClock = SystemClock()) {
        self.store = store
        self.limits = limits
        self.namespace = namespace
        self.clock = clock
        self.local = TokenBucketRateLimiter(limits: limits, burst: 1, clock: clock)
    }

    func bucketKey(_ key: RateLimitKey) -> String { "\(namespace)/\(key.endpoint.rawValue)/\(key.environment.rawValue)" }

    public func acquire(_ key: RateLimitKey, maxWait: TimeInterval) async throws -> RateLimitDecision {
        let deadline = clock.now().addingTimeInterval(maxWait)
        let rate = limits.perSecond(key)
        // Take about a fifth of a second's worth at a time: few round trips, little hoarding.
        let chunk = max(1, Int(rate / 5))
        while (stash[key] ?? 0) == 0 {
            let grant: BudgetGrant
            do {
                grant = try await store.apiBudgetTake(key: bucketKey(key), rate: rate, burst: max(Double(chunk), rate / 2), want: chunk)
            } catch {
                // The database is the source of truth; without it, wait a little and ask again.
                grant = BudgetGrant(granted: 0, retryAfter: 0.5)
            }
            if grant.granted > 0 {
                stash[key, default: 0] += grant.granted
                break
            }
            let next = clock.now().addingTimeInterval(max(0.005, grant.retryAfter))
            if next > deadline { return .notBefore(next) }
            try await clock.sleep(until: next)
        }
        stash[key, default: 0] -= 1
        let remaining = max(0, deadline.timeIntervalSince(clock.now()))
        let decision = try await local.acquire(key, maxWait: remaining)
        if case .notBefore = decision { stash[key, default: 0] += 1 }
        return decision
    }

    public func rateLimited(_ key: RateLimitKey, until: Date) async {
        stash[key] = 0
        await local.rateLimited(key, until: until)
        try? await store.apiBudgetPause(key: bucketKey(key), until: until)
    }
}
