import Foundation

/// The result of one client call. The worker switches on it; nothing here is a string to match.
public enum AppStoreOutcome<Value: Sendable>: Sendable {
    /// Apple answered and every signed payload in the answer verified.
    case success(Value)
    /// 404 (other than Apple's retryable 404s). ``AppStoreErrorCode/transactionIdNotFound``
    /// (4040010) means "try the other environment once": see
    /// ``AppStoreServerAPIClient/withEnvironmentFallback(startingWith:_:)``.
    case notFound(AppStoreErrorCode?)
    /// 429 whose `Retry-After` lies beyond the call's wait budget (or retries ran out): the
    /// endpoint may be called again at `until`.
    case rateLimited(until: Date)
    /// A temporary failure that outlasted the retries: 4040002/4040004/4040006, 5xx, timeouts,
    /// connection errors, retryable verifyReceipt statuses.
    case retryable(RetryableFailure)
    /// Apple refused the API key twice in a row (a fresh token did not help). Terminal: fix the
    /// issuer ID, key ID or key.
    case unauthorized
    /// 400 or another 4xx: the request is wrong and will stay wrong. For verifyReceipt, the status.
    case badRequest(AppStoreErrorCode?)
    /// A signed payload in Apple's answer failed verification; nothing from it is returned as
    /// data. `payload` is the rejected JWS as received, for quarantine (never trusted).
    case verificationFailed(JWSVerificationFailure, payload: String)
    /// Apple's answer could not be decoded (the text says what was wrong).
    case malformedResponse(String)
    /// The server's TLS certificate is not trusted (or names another host): not Apple, or a
    /// server behind a CA that is not configured. Terminal: no call will get through.
    case untrustedServer(String)

    /// The value, if the call succeeded.
    public var value: Value? {
        if case .success(let v) = self { return v }
        return nil
    }

    /// `true` for 4040010: the transaction ID is unknown in the environment that was called.
    public var isTransactionUnknownInEnvironment: Bool {
        if case .notFound(.transactionIdNotFound?) = self { return true }
        return false
    }

    /// A failure re-typed for another value type. Must not be called on `.success`.
    func failure<T: Sendable>() -> AppStoreOutcome<T> {
        switch self {
        case .success: preconditionFailure("failure() called on a success")
        case .notFound(let c): .notFound(c)
        case .rateLimited(let d): .rateLimited(until: d)
        case .retryable(let r): .retryable(r)
        case .unauthorized: .unauthorized
        case .badRequest(let c): .badRequest(c)
        case .verificationFailed(let f, let p): .verificationFailed(f, payload: p)
        case .malformedResponse(let m): .malformedResponse(m)
        case .untrustedServer(let m): .untrustedServer(m)
        }
    }

    /// The same outcome with the success value transformed.
    public func map<T: Sendable>(_ transform: (Value) throws -> T) rethrows -> AppStoreOutcome<T> {
        switch self {
        case .success(let v): .success(try transform(v))
        case .notFound(let c): .notFound(c)
        case .rateLimited(let d): .rateLimited(until: d)
        case .retryable(let r): .retryable(r)
        case .unauthorized: .unauthorized
        case .badRequest(let c): .badRequest(c)
        case .verificationFailed(let f, let p): .verificationFailed(f, payload: p)
        case .malformedResponse(let m): .malformedResponse(m)
        case .untrustedServer(let m): .untrustedServer(m)
        }
    }
}

extension AppStoreOutcome: CustomStringConvertible {
    public var description: String {
        switch self {
        case .success: "success"
        case .notFound(let c): "not found (\(c?.description ?? "no code"))"
        case .rateLimited(let d): "rate limited until \(d.ISO8601Format())"
        case .retryable(let r): "temporary failure: \(r)"
        case .unauthorized: AppStoreOutcomeMessages.unauthorized
        case .badRequest(let c): "bad request (\(c?.description ?? "no code"))"
        case .verificationFailed(let f, _): "verification failed: \(f)"
        case .malformedResponse(let m): "malformed response: \(m)"
        case .untrustedServer(let m): AppStoreOutcomeMessages.untrustedServer(m)
        }
    }
}

enum AppStoreOutcomeMessages {
    static let unauthorized = "Apple rejected the API key: check issuer id, key id and key"
    static func untrustedServer(_ detail: String) -> String {
        "untrusted server: \(detail); check APPSTORE_BASE_URL, or trust its CA with APPSTORE_TLS_ROOT_CERTS"
    }
}

/// Why a call failed temporarily.
public enum RetryableFailure: Hashable, Sendable, CustomStringConvertible {
    /// An HTTP answer worth retrying (5xx, Apple's retryable 404s, retryable verifyReceipt statuses).
    case http(status: Int, code: AppStoreErrorCode?)
    /// The request timed out.
    case timeout
    /// No connection or it broke; the text is for logs.
    case connection(String)

    public var description: String {
        switch self {
        case .http(let s, let c): "HTTP \(s)\(c.map { " \($0)" } ?? "")"
        case .timeout: "timeout"
        case .connection(let m): "connection: \(m)"
        }
    }
}
