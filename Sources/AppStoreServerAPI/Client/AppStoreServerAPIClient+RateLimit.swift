import Foundation
import Logging

/// What a 429 makes the client say, and how its `Retry-After` is read.
extension AppStoreServerAPIClient {
    /// A 429: the pause its `Retry-After` asks for (capped by `APPSTORE_MAX_RETRY_WAIT`; without
    /// one, the back-off of this attempt), told to the limiter, and said once per burst.
    func pauseForRateLimit(_ key: RateLimitKey, retryAfter: String?, attempt: Int, sentAt: Date) async -> (until: Date, capped: Bool) {
        let policy = configuration.retryPolicy
        let now = clock.now()
        let asked = Self.parseRetryAfter(retryAfter, now: now) ?? now.addingTimeInterval(policy.ceiling(afterAttempt: attempt))
        let (until, capped) = policy.pause(retryAfter: asked, now: now)
        if capped { warnRetryAfterCapped(key, raw: retryAfter ?? "", asked: asked, until: until) }
        await limiter.rateLimited(key, until: until, sentAt: sentAt)
        // A burst of 429s is one warning (then one per 10 s per endpoint), not a line each.
        let level: Logger.Level = rateLimitWarned.withLock { last in
            guard now.timeIntervalSince(last[key] ?? .distantPast) >= 10 else { return .debug }
            last[key] = now
            return .warning
        }
        logger.log(level: level, "Apple rate limit on \(key), paused until \(until.ISO8601Format())")
        return (until, capped)
    }

    /// One warning per process (then debug lines): the server asked for a pause longer than
    /// `APPSTORE_MAX_RETRY_WAIT`, and churnwatch pauses only that long.
    func warnRetryAfterCapped(_ key: RateLimitKey, raw: String, asked: Date, until: Date) {
        let first = retryAfterWarned.withLock { warned in
            defer { warned = true }
            return !warned
        }
        let text = "\(key): the server's Retry-After \"\(raw.prefix(40))\" asks for a pause until \(asked.ISO8601Format()); "
            + "APPSTORE_MAX_RETRY_WAIT caps it at \(Int(configuration.retryPolicy.maxTotalWait)) s (until \(until.ISO8601Format())): "
            + "the call fails as rate limited and is retried later in the run or on resume"
        if first { logger.warning("\(text)") } else { logger.debug("\(text)") }
    }

    /// `Retry-After` as Apple sends it: UNIX time in milliseconds. A small integer is taken as
    /// delay-seconds (RFC 9110), which some compatible servers send.
    static func parseRetryAfter(_ value: String?, now: Date) -> Date? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), let number = Int64(value), number >= 0 else { return nil }
        if number >= 100_000_000_000 { return Date(timeIntervalSince1970: Double(number) / 1000) }
        return now.addingTimeInterval(Double(number))
    }
}
