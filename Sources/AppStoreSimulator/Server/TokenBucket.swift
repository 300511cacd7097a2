/// A token bucket: `rate` tokens per second up to `burst`. Apple's hourly enforcement of R/s is a
/// bucket with burst R×3600. Not thread-safe; ``SimulatorService`` guards it.
struct TokenBucket {
    let rate: Double
    let burst: Double
    private var tokens: Double
    private var last: Double

    init(rate: Double, burst: Double, now: Double) {
        self.rate = rate
        self.burst = max(1, burst)
        tokens = self.burst
        last = now
    }

    /// Takes a token at `now` (seconds); on refusal returns when one is available (seconds).
    mutating func take(now: Double) -> (ok: Bool, retryAt: Double) {
        tokens = min(burst, tokens + (now - last) * rate)
        last = now
        if tokens >= 1 {
            tokens -= 1
            return (true, now)
        }
        return (false, now + (1 - tokens) / rate)
    }
}
