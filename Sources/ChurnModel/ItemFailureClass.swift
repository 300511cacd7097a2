/// Why a run item failed: stored in `run_items.failure_class` (text the schema checks against
/// exactly these raw values, migration 0010) next to the reason's prose in `outcome`, and read
/// back as this type. Resume, the 429 retry rounds, the run summary, `status` and the metrics
/// switch on it; no reason text is ever matched.
public enum ItemFailureClass: String, Sendable, CaseIterable, Codable {
    /// Apple knows the id in no environment, or its answer does not name the subscription.
    case notFound = "not_found"
    /// Apple refused the request as malformed (4xx other than 401, 404, 429).
    case badRequest = "bad_request"
    /// A signed payload failed verification (it is quarantined).
    case verification
    /// Apple's answer could not be read, or lacks what the worker needs.
    case malformed
    /// Apple answered 429 past the wait budget.
    case rateLimited = "rate_limited"
    /// Apple was not answering (5xx, timeouts, broken connections).
    case unavailable
    /// Apple rejected the API key.
    case unauthorized
    /// The server's TLS certificate was not trusted.
    case untrustedServer = "untrusted_server"
    /// A bug in the worker (a success handled as a failure).
    case `internal`
    /// A failed item whose class is not known: rows failed before migration 0010 whose reason
    /// began with none of the known prefixes, or failed without a reason.
    case unknown

    /// The words failures are counted under in the run summary, `status` (text and JSON) and the
    /// metrics: the prefix the reason's prose begins with ("not found", "rate limited", ...).
    public var label: String {
        switch self {
        case .notFound: "not found"
        case .badRequest: "bad request"
        case .verification: "verification"
        case .malformed: "malformed"
        case .rateLimited: "rate limited"
        case .unavailable: "unavailable"
        case .unauthorized: "unauthorized"
        case .untrustedServer: "untrusted server"
        case .internal: "internal"
        case .unknown: "unknown"
        }
    }

    /// Whose failure it is: this subscription's, or the whole run's (and why). Decided here
    /// only: the run engine stops on the run's, a resumed run tries those items again.
    public enum Scope: Sendable, Equatable {
        /// About this subscription only (unknown id, bad payload): the run goes on.
        case subscription
        /// Apple is not answering (5xx, timeouts, broken connections).
        case appleUnavailable
        /// Apple answers 429 past the wait budget: its rate limit, not an outage.
        case rateLimited
        /// Apple refused the API key: nothing will work until it is fixed.
        case unauthorized
        /// The server's TLS certificate is not trusted: nothing will get through until the base
        /// URL or the trusted CAs are fixed (or whoever sits in between is gone).
        case untrustedServer
    }

    public var scope: Scope {
        switch self {
        case .rateLimited: .rateLimited
        case .unavailable: .appleUnavailable
        case .unauthorized: .unauthorized
        case .untrustedServer: .untrustedServer
        case .notFound, .badRequest, .verification, .malformed, .internal, .unknown: .subscription
        }
    }

    /// A reason of the whole run, not of the subscription (Apple unavailable or rate limiting, a
    /// rejected key, an untrusted certificate): a resumed run tries the item again.
    public var retriedOnResume: Bool { scope != .subscription }

    /// Failed items counted by label; a missing class counts as `unknown`.
    public static func countedByLabel(_ counts: [(ItemFailureClass?, Int)]) -> [String: Int] {
        var out: [String: Int] = [:]
        for (c, n) in counts { out[(c ?? .unknown).label, default: 0] += n }
        return out
    }
}
