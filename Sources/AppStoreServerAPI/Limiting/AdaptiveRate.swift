import Foundation

/// How far below its configured rate one endpoint is sent after 429s: multiplicative decrease,
/// multiplicative increase over time. Pure: every call takes the times.
///
/// - **One burst is one signal.** A 429 cuts the rate (× `decrease`) only when its request was
///   sent after the previous cut, at the rate that cut set. The answers to requests that were
///   in flight together (a burst: up to the concurrency) say nothing new about that rate and
///   count once, however many come back and whatever the round trip.
/// - **Recovery within seconds.** From the moment sending resumes (the end of the cut's pause),
///   the rate grows by × `recovery` per second (1/2 → full in about 3 s, 1/8 in about 9 s), up to
///   the configured rate, so a server whose real rate is below the configured one is probed and
///   settled near it instead of being under-used for minutes.
/// - The rate never goes below `minimumFactor` of the configured rate.
public struct AdaptiveRate: Sendable, Equatable {
    public var decrease: Double
    public var recovery: Double
    public var minimumFactor: Double
    /// The factor when sending resumed after the last cut.
    private(set) var base: Double = 1
    /// When sending resumed after the last cut (the end of its pause); recovery counts from here.
    private(set) var resumedAt: Date = .distantPast
    /// When the last cut was made: requests sent before it belong to the burst it answered.
    private(set) var lastCut: Date = .distantPast

    public init(decrease: Double = 0.5, recovery: Double = 1.25, minimumFactor: Double = 1.0 / 256) {
        self.decrease = min(max(decrease, 0.01), 1)
        self.recovery = max(recovery, 1)
        self.minimumFactor = min(max(minimumFactor, 1e-6), 1)
    }

    /// The fraction of the configured rate to send at, at `now`.
    public func factor(at now: Date) -> Double {
        guard base < 1 else { return 1 }
        let elapsed = max(0, now.timeIntervalSince(resumedAt))
        return min(1, base * pow(recovery, elapsed))
    }

    /// A 429 answered at `now` to a request sent at `sentAt`; nothing is sent before
    /// `pausedUntil` (its `Retry-After`, capped). Returns true when it cut the rate, false when
    /// its request was sent before the last cut (the same burst).
    @discardableResult
    public mutating func rateLimited(at now: Date, sentAt: Date, pausedUntil: Date) -> Bool {
        guard sentAt >= lastCut else { return false }
        base = max(minimumFactor, factor(at: now) * decrease)
        lastCut = now
        resumedAt = max(now, pausedUntil)
        return true
    }
}
