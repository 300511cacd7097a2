import AppStoreServerAPI
import ChurnModel
import Foundation

/// The one classification of Apple's answers, for every caller that talks to Apple (a poll, a
/// history page, a refund answer): a failure's class (``ItemFailureClass``: what to do, and
/// through its scope whether the work stops: ``RunStop/init(_:detail:)``) and one line of
/// reason, which the item, the feed's summary and the request's `last_error` all say alike.
///
/// Apple answering 429, from the client to the exit code: the client (`AppStoreServerAPIClient`)
/// pauses every process of the deployment until Apple's `Retry-After` and lowers the shared
/// rate (`SharedBudgetLimiter`), trying again while `APPSTORE_MAX_RETRY_WAIT` lasts; then it
/// gives up with `.rateLimited`. Here that is the class `rate_limited`, scope `.rateLimited`,
/// and ``RunStop/appleUnavailable(_:rateLimited:)`` with `rateLimited` true. A poll's item
/// fails with it, and the run stops after `outageThreshold` such failures in a row
/// (``RunMachine``); items that failed only that way are polled again a few rounds before the
/// run stops so (``RateLimitedRetryRule``). A history page ends the feed's sync: `run` plans
/// that environment by the windows (or, on a first sync, plans nothing), `notifications sync`
/// exits 75. A refund answer ends the pass, its request left pending for the next sync. The
/// CLI adds the rate the shared budget came down to, and the exit code is 75
/// (`RunStop.exitStatus`, the one table).
enum AppleAnswer {
    static func classify<T>(_ outcome: AppStoreOutcome<T>) -> (reason: String, failureClass: ItemFailureClass) {
        switch outcome {
        case .success: ("internal: success treated as failure", .internal)
        case .notFound(let code): ("not found: \(code.map { String($0.rawValue) } ?? "404")", .notFound)
        case .rateLimited(let until): ("rate limited: until \(until.ISO8601Format())", .rateLimited)
        case .retryable(let why): ("unavailable: \(why)", .unavailable)
        case .unauthorized: ("unauthorized: Apple rejected the API key: check issuer id, key id and key", .unauthorized)
        case .badRequest(let code): ("bad request: \(code.map { String($0.rawValue) } ?? "4xx")", .badRequest)
        case .verificationFailed(let why, _): ("verification: \(why)", .verification)
        case .malformedResponse(let why): ("malformed: \(why)", .malformed)
        case .untrustedServer: ("\(outcome)", .untrustedServer)
        }
    }

    /// The stop a failed answer brings to work that cannot go on without Apple (a history sync,
    /// a pass of refund answers), `prefix` before its detail; nil for a failure of the request's own.
    static func stop<T>(_ outcome: AppStoreOutcome<T>, prefix: String = "") -> RunStop? {
        let (reason, failureClass) = classify(outcome)
        return RunStop(failureClass.scope, detail: reason)?.prefixed(prefix)
    }
}
