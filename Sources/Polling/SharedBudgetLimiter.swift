import AppStoreServerAPI
import ChurnStore
import Foundation
import Logging

/// Apple's per-app budget shared by every process working a run: tokens come from a bucket
/// row in PostgreSQL (`churnwatch.api_budget`), a few at a time, and each process spaces its
/// own calls evenly with an in-process bucket. The sum over all processes never exceeds the
/// configured rate; one process alone uses all of it.
///
/// A process given a `BudgetYield` (a backfill) keeps to a share of the rate while something
/// more important (a nightly run) is working: it paces itself at `share` × the rate and draws
/// fewer tokens at a time, so the other processes get the rest of the same bucket.
public actor SharedBudgetLimiter: AppStoreRateLimiter {
    private let store: ChurnStore
    private let limits: AppStoreRateLimits
    private let local: TokenBucketRateLimiter
    private let clock: any AppStoreClock
    private let namespace: String
    private var stash: [RateLimitKey: Int] = [:]
    private var allowedRate: [RateLimitKey: Double] = [:]
    /// The shared bucket's rate at the last take, and this process's next slot at it.
    private var sharedRate: [RateLimitKey: Double] = [:]
    private var sharedSlot: [RateLimitKey: Date] = [:]
    private var stashedAt: [RateLimitKey: Date] = [:]
    /// Tokens drawn from the bucket row are spent within this long or dropped. A process the
    /// machine starved for a moment must not spend them late, beside the tokens the bucket has
    /// given the other processes since: over any second the sum would then pass the rate
    /// (the row's burst is half a second's worth, so 0.4 s keeps every second under it).
    static let stashLifetime: TimeInterval = 0.4
    private let yield: BudgetYield?
    private let yieldingLocal: TokenBucketRateLimiter?
    private var yielding = false
    private var yieldCheckedAt = Date.distantPast
    private var yieldChecking = false
    private let maxPause: TimeInterval
    private let logger: Logger?

    /// - Parameters:
    ///   - namespace: what the budget belongs to (the app's bundle id): apps have separate budgets.
    ///   - yield: when set, this process takes only a share of the budget while `yield.isActive` says so.
    ///   - maxPause: the longest pause a 429 may store (`APPSTORE_MAX_RETRY_WAIT`); a stored pause
    ///     ending later than that from now is dropped, with a warning on `logger`.
    public init(store: ChurnStore, limits: AppStoreRateLimits, namespace: String, clock: any AppStoreClock = SystemClock(),
                yield: BudgetYield? = nil, maxPause: TimeInterval = .infinity, logger: Logger? = nil) {
        self.store = store
        self.maxPause = maxPause
        self.logger = logger
        self.limits = limits
        self.namespace = namespace
        self.clock = clock
        // The shared row adapts to 429s for every process (``BudgetAdaptation``); the local
        // pacer only spaces this process's calls and honours the pause.
        self.local = TokenBucketRateLimiter(limits: limits, burst: 1, clock: clock, backoff: Self.noCut)
        self.yield = yield
        self.yieldingLocal = yield.map { y in
            TokenBucketRateLimiter(limits: AppStoreRateLimits(production: limits.production.mapValues { $0 * y.share },
                                                              sandbox: limits.sandbox.mapValues { $0 * y.share }),
                                   burst: 1, clock: clock, backoff: Self.noCut)
        }
    }

    /// A local pacer that a 429 pauses but does not slow: the shared row does that.
    static let noCut = AdaptiveRate(decrease: 1)

    func bucketKey(_ key: RateLimitKey) -> String { "\(namespace)/\(key.endpoint.rawValue)/\(key.environment.rawValue)" }

    /// True while this process keeps to its share (for tests and logs).
    public var isYielding: Bool { yielding }

    public func acquire(_ key: RateLimitKey, maxWait: TimeInterval) async throws -> RateLimitDecision {
        await refreshYield()
        let deadline = clock.now().addingTimeInterval(maxWait)
        let rate = limits.perSecond(key)
        // Take about a fifth of a second's worth at a time: few round trips, little hoarding.
        // The bucket row itself always has the full rate and burst, whoever asks.
        // At most 20: before a server's first 429 says it allows less, a chunk is sent at the
        // configured pace (at 2,000/s a fifth of a second would be 400 refusals).
        let chunk = max(1, min(20, Int(rate / 5)))
        let want = yielding ? max(1, Int(rate * (yield?.share ?? 1) / 5)) : chunk
        if let at = stashedAt[key], clock.now().timeIntervalSince(at) > Self.stashLifetime { stash[key] = 0 }
        while (stash[key] ?? 0) == 0 {
            let grant: BudgetGrant
            do {
                grant = try await store.apiBudgetTake(key: bucketKey(key), rate: rate, burst: max(Double(chunk), rate / 2), want: want,
                                                      maxPause: maxPause)
            } catch {
                // The database is the source of truth; without it, wait a little and ask again.
                grant = BudgetGrant(granted: 0, retryAfter: 0.5)
            }
            if let dropped = grant.droppedPause {
                logger?.warning("dropped a stored Apple rate-limit pause past APPSTORE_MAX_RETRY_WAIT", metadata: [
                    "budget": "\(bucketKey(key))", "paused_until": "\(dropped.ISO8601Format())", "cap_s": "\(Int(maxPause))",
                ])
            }
            if let r = grant.rate { sharedRate[key] = r }
            if grant.granted > 0 {
                stash[key, default: 0] += grant.granted
                stashedAt[key] = clock.now()
                break
            }
            let next = clock.now().addingTimeInterval(max(0.005, grant.retryAfter))
            if next > deadline { return .notBefore(next) }
            try await clock.sleep(until: next)
        }
        stash[key, default: 0] -= 1
        // Below the configured rate (a server's 429s cut the shared rate), this process spaces
        // its calls at the shared rate: a stash sent at the configured pace is a burst the server
        // refuses in part, and each refusal would cut the rate further below what it allows.
        if let r = sharedRate[key], r < rate * 0.999 {
            let now = clock.now()
            let slot = max(now, sharedSlot[key] ?? now)
            sharedSlot[key] = slot.addingTimeInterval(1 / max(r, 0.001))
            if slot > deadline {
                stash[key, default: 0] += 1
                return .notBefore(slot)
            }
            if slot > now { try await clock.sleep(until: slot) }
        }
        let remaining = max(0, deadline.timeIntervalSince(clock.now()))
        let pacer = yielding ? (yieldingLocal ?? local) : local
        let decision = try await pacer.acquire(key, maxWait: remaining)
        if case .notBefore = decision { stash[key, default: 0] += 1 }
        return decision
    }

    public func rateLimited(_ key: RateLimitKey, until: Date, sentAt: Date) async {
        stash[key] = 0
        await local.rateLimited(key, until: until, sentAt: sentAt)
        await yieldingLocal?.rateLimited(key, until: until, sentAt: sentAt)
        let allowed = try? await store.apiBudgetPause(key: bucketKey(key), until: until, sentAt: sentAt, maxPause: maxPause)
        if let rate = allowed.flatMap({ $0 }) { allowedRate[key] = rate }
    }

    /// The rate the shared budget last allowed for `key` after a 429 (nil: never cut), for the
    /// run's last line when Apple stays unavailable.
    public func allowedRate(_ key: RateLimitKey) -> Double? { allowedRate[key] }

    /// Asks `yield.isActive` again when its interval has passed (one question at a time).
    private func refreshYield() async {
        guard let yield, !yieldChecking, clock.now().timeIntervalSince(yieldCheckedAt) >= yield.interval else { return }
        yieldChecking = true
        let answer = await yield.isActive()
        yieldChecking = false
        yieldCheckedAt = clock.now()
        if let active = answer, active != yielding {
            yielding = active
            // Tokens drawn at the full pace go back to the pool of this process only by use;
            // drop them so the share starts now.
            if active { stash = [:] }
            yield.onChange?(active)
        }
    }
}

/// Keeping to a share of the budget while something more important works.
public struct BudgetYield: Sendable {
    /// The fraction of the rate used while yielding (0 < share ≤ 1).
    public var share: Double
    /// Seconds between two questions to `isActive`.
    public var interval: TimeInterval
    /// True while the more important work is going on; nil when that cannot be told right now
    /// (the database is away): nothing changes.
    public var isActive: @Sendable () async -> Bool?
    /// Told when yielding starts (true) or ends (false), for a log line.
    public var onChange: (@Sendable (Bool) -> Void)?

    public init(share: Double, interval: TimeInterval = 1, isActive: @escaping @Sendable () async -> Bool?,
                onChange: (@Sendable (Bool) -> Void)? = nil) {
        self.share = min(1, max(0.001, share))
        self.interval = interval
        self.isActive = isActive
        self.onChange = onChange
    }
}
