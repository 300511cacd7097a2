import AppStoreModels
import Foundation
import Logging
import Synchronization

/// The App Store Server API client: ES256 bearer tokens, the endpoints churnwatch needs, JWS
/// verification of every signed payload, typed outcomes, a shared rate limiter and retries.
///
/// Thread-safe: create one per process and share it among tasks.
public final class AppStoreServerAPIClient: Sendable {
    public let configuration: AppStoreConfiguration
    public let verifier: SignedDataVerifier
    public let tokens: AppStoreTokenProvider
    private let transport: any HTTPTransport
    let limiter: any AppStoreRateLimiter
    let clock: any AppStoreClock
    private let random: @Sendable () -> Double
    let logger: Logger
    let retryAfterWarned = Mutex(false)
    let rateLimitWarned = Mutex<[RateLimitKey: Date]>([:])
    static let userAgent = "churnwatch/1.0"

    /// - Parameters:
    ///   - transport: the HTTP client; by default ``NIOHTTPTransport/forConfiguration(_:)``.
    ///   - limiter: the shared budget; by default a ``TokenBucketRateLimiter`` with the configured rates.
    ///   - clock: time for tokens, backoff, `Retry-After` and the limiter.
    ///   - random: uniform values in [0, 1) for backoff jitter.
    ///   - logger: the caller's (retries, rate limits, environment fallbacks).
    public init(
        configuration: AppStoreConfiguration, transport: (any HTTPTransport)? = nil,
        limiter: (any AppStoreRateLimiter)? = nil, clock: any AppStoreClock = SystemClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        logger: Logger
    ) {
        self.configuration = configuration
        // The TLS roots were read and parsed when the configuration was loaded; converting them
        // cannot fail for certificates swift-certificates accepted. Should it, the system's
        // bundle alone is used and the server is reported as untrusted, never silently trusted.
        self.transport = transport ?? ((try? NIOHTTPTransport.forConfiguration(configuration)) ?? NIOHTTPTransport.shared)
        self.clock = clock
        self.random = random
        self.logger = logger
        self.limiter = limiter ?? TokenBucketRateLimiter(limits: configuration.rateLimits, clock: clock)
        self.verifier = SignedDataVerifier(
            rootCertificates: configuration.rootCertificates, bundleId: configuration.bundleId, clock: clock,
            options: .init(strictX509: configuration.strictX509))
        self.tokens = AppStoreTokenProvider(
            issuerId: configuration.issuerId, keyId: configuration.keyId, bundleId: configuration.bundleId,
            privateKey: configuration.signingKey.key, clock: clock)
    }

    // MARK: Endpoints

    /// Get All Subscription Statuses: `GET /inApps/v1/subscriptions/{transactionId}`, optionally
    /// only subscriptions in the given statuses. Every transaction and renewal info is verified,
    /// and bound to its item's `originalTransactionId`.
    public func subscriptionStatuses(
        for transactionId: String, status: [SubscriptionStatus] = [], environment: AppStoreEnvironment? = nil
    ) async -> AppStoreOutcome<VerifiedSubscriptionStatuses> {
        let env = environment ?? configuration.environment
        let query = status.map { (name: "status", value: String($0.rawValue)) }
        let response = await send(.subscriptionStatuses, env, path: "/inApps/v1/subscriptions/\(Self.escape(transactionId))", query: query)
        guard case .success(let http) = response else { return response.failure() }
        let decoded: StatusResponse
        do { decoded = try JSONDecoder().decode(StatusResponse.self, from: http.body) } catch {
            return .malformedResponse("status response: \(Self.describe(error))")
        }
        var groups: [VerifiedSubscriptionStatuses.Group] = []
        var rejected: [VerifiedSubscriptionStatuses.Rejected] = []
        for group in decoded.data ?? [] {
            var subscriptions: [VerifiedSubscriptionStatuses.Subscription] = []
            for item in group.lastTransactions ?? [] {
                guard let signedTransaction = item.signedTransactionInfo else {
                    return .malformedResponse("status response: lastTransactions item without signedTransactionInfo")
                }
                switch await verifyStatusItem(item, signedTransaction: signedTransaction, environment: env) {
                case .success(let subscription): subscriptions.append(subscription)
                case .failure(let rejection): rejected.append(rejection)
                }
            }
            groups.append(.init(subscriptionGroupIdentifier: group.subscriptionGroupIdentifier, subscriptions: subscriptions))
        }
        // Nothing usable at all: the answer as a whole failed (as a single-item answer always did).
        if let first = rejected.first, groups.allSatisfy(\.subscriptions.isEmpty) {
            return .verificationFailed(first.failure, payload: first.payload)
        }
        return .success(VerifiedSubscriptionStatuses(
            environment: env, bundleId: decoded.bundleId, appAppleId: decoded.appAppleId, groups: groups, rejected: rejected))
    }

    /// Verifies one item of a status answer: its transaction, its renewal info, and that both
    /// belong to the item's `originalTransactionId`. A failure rejects this item only.
    private func verifyStatusItem(
        _ item: LastTransactionsItem, signedTransaction: String, environment env: AppStoreEnvironment
    ) async -> Result<VerifiedSubscriptionStatuses.Subscription, VerifiedSubscriptionStatuses.Rejected> {
        func reject(_ failure: JWSVerificationFailure, _ payload: String) -> Result<VerifiedSubscriptionStatuses.Subscription, VerifiedSubscriptionStatuses.Rejected> {
            .failure(.init(originalTransactionId: item.originalTransactionId, failure: failure, payload: payload))
        }
        let transaction: JWSTransactionDecodedPayload
        var renewal: JWSRenewalInfoDecodedPayload?
        do {
            transaction = try await verifier.verifyTransaction(signedTransaction, environment: env)
        } catch {
            return reject(error, signedTransaction)
        }
        if let signedRenewal = item.signedRenewalInfo {
            do {
                renewal = try await verifier.verifyRenewalInfo(signedRenewal, environment: env)
            } catch {
                return reject(error, signedRenewal)
            }
        }
        for (signed, payload) in [(transaction.originalTransactionId, signedTransaction),
                                  (renewal?.originalTransactionId, item.signedRenewalInfo ?? "")] {
            if let signed, let expected = item.originalTransactionId, signed != expected {
                return reject(.originalTransactionIdMismatch(expected: expected, actual: signed), payload)
            }
        }
        if let renewal, renewal.originalTransactionId != transaction.originalTransactionId {
            return reject(.originalTransactionIdMismatch(expected: transaction.originalTransactionId, actual: renewal.originalTransactionId),
                          item.signedRenewalInfo ?? "")
        }
        return .success(.init(
            rawStatus: item.rawStatus, originalTransactionId: item.originalTransactionId,
            transaction: transaction, renewalInfo: renewal, signedTransactionInfo: signedTransaction,
            signedRenewalInfo: item.signedRenewalInfo))
    }

    /// Get Transaction History (v2): `GET /inApps/v2/history/{transactionId}`, following
    /// `revision` until `hasMore` is false, with the same filters on every page. Every
    /// transaction is verified.
    public func transactionHistory(
        for transactionId: String, filters: TransactionHistoryRequest = TransactionHistoryRequest(),
        environment: AppStoreEnvironment? = nil, maximumPages: Int = 10_000, since stored: String? = nil
    ) async -> AppStoreOutcome<VerifiedTransactionHistory> {
        let env = environment ?? configuration.environment
        var history = VerifiedTransactionHistory(
            environment: env, bundleId: nil, appAppleId: nil, transactions: [], signedTransactions: [], revision: stored, pages: 0)
        // A stored final revision returns what was added or modified since (with the filters it
        // was issued for); Apple answers 400 InvalidRequestRevision (4000005) to one it rejects.
        var revision: String? = stored
        while true {
            let response = await send(.transactionHistory, env, path: "/inApps/v2/history/\(Self.escape(transactionId))",
                                      query: filters.queryItems(revision: revision))
            guard case .success(let http) = response else { return response.failure() }
            let page: HistoryResponse
            do { page = try JSONDecoder().decode(HistoryResponse.self, from: http.body) } catch {
                return .malformedResponse("history response: \(Self.describe(error))")
            }
            history.pages += 1
            history.bundleId = page.bundleId ?? history.bundleId
            history.appAppleId = page.appAppleId ?? history.appAppleId
            for signed in page.signedTransactions ?? [] {
                do { history.transactions.append(try await verifier.verifyTransaction(signed, environment: env)) } catch {
                    return .verificationFailed(error, payload: signed)
                }
                history.signedTransactions.append(signed)
            }
            history.revision = page.revision ?? history.revision
            guard page.hasMore == true else { return .success(history) }
            guard let next = page.revision, next != revision else {
                return .malformedResponse("history response: hasMore without a new revision")
            }
            guard history.pages < maximumPages else {
                return .malformedResponse("history response: more than \(maximumPages) pages")
            }
            revision = next
        }
    }

    /// Get Transaction Info: `GET /inApps/v1/transactions/{transactionId}`, verified.
    public func transactionInfo(
        for transactionId: String, environment: AppStoreEnvironment? = nil
    ) async -> AppStoreOutcome<VerifiedTransaction> {
        let env = environment ?? configuration.environment
        let response = await send(.transactionInfo, env, path: "/inApps/v1/transactions/\(Self.escape(transactionId))", query: [])
        guard case .success(let http) = response else { return response.failure() }
        let decoded: TransactionInfoResponse
        do { decoded = try JSONDecoder().decode(TransactionInfoResponse.self, from: http.body) } catch {
            return .malformedResponse("transaction info response: \(Self.describe(error))")
        }
        guard let signed = decoded.signedTransactionInfo else {
            return .malformedResponse("transaction info response without signedTransactionInfo")
        }
        do {
            let transaction = try await verifier.verifyTransaction(signed, environment: env)
            return .success(VerifiedTransaction(environment: env, transaction: transaction, signedTransactionInfo: signed))
        } catch {
            return .verificationFailed(error, payload: signed)
        }
    }

    /// Get Refund History (v2): `GET /inApps/v2/refund/lookup/{transactionId}`, every page after
    /// `revision` (nil: from the start). Returns the last revision to poll incrementally.
    public func refundHistory(
        for transactionId: String, after revision: String? = nil, environment: AppStoreEnvironment? = nil,
        maximumPages: Int = 10_000
    ) async -> AppStoreOutcome<VerifiedRefundHistory> {
        let env = environment ?? configuration.environment
        var result = VerifiedRefundHistory(environment: env, transactions: [], signedTransactions: [], revision: revision, pages: 0)
        var current = revision
        while true {
            let query = current.map { [(name: "revision", value: $0)] } ?? []
            let response = await send(.refundHistory, env, path: "/inApps/v2/refund/lookup/\(Self.escape(transactionId))", query: query)
            guard case .success(let http) = response else { return response.failure() }
            let page: RefundHistoryResponse
            do { page = try JSONDecoder().decode(RefundHistoryResponse.self, from: http.body) } catch {
                return .malformedResponse("refund history response: \(Self.describe(error))")
            }
            result.pages += 1
            for signed in page.signedTransactions ?? [] {
                do { result.transactions.append(try await verifier.verifyTransaction(signed, environment: env)) } catch {
                    return .verificationFailed(error, payload: signed)
                }
                result.signedTransactions.append(signed)
            }
            result.revision = page.revision ?? result.revision
            guard page.hasMore == true else { return .success(result) }
            guard let next = page.revision, next != current else {
                return .malformedResponse("refund history response: hasMore without a new revision")
            }
            guard result.pages < maximumPages else {
                return .malformedResponse("refund history response: more than \(maximumPages) pages")
            }
            current = next
        }
    }

    /// Calls `call` in `environment` (default: the configured one); when that answers 4040010
    /// (transaction ID unknown there), calls it once more in the other environment. Returns the
    /// last outcome and the environment that gave it.
    public func withEnvironmentFallback<T: Sendable>(
        startingWith environment: AppStoreEnvironment? = nil,
        _ call: (AppStoreEnvironment) async -> AppStoreOutcome<T>
    ) async -> (outcome: AppStoreOutcome<T>, environment: AppStoreEnvironment) {
        let first = environment ?? configuration.environment
        let outcome = await call(first)
        guard outcome.isTransactionUnknownInEnvironment else { return (outcome, first) }
        let other: AppStoreEnvironment = first == .sandbox ? .production : .sandbox
        logger.debug("transaction unknown in \(first.rawValue), trying \(other.rawValue)")
        return (await call(other), other)
    }

    // MARK: HTTP with auth, limits and retries

    /// Outcome of the HTTP exchange before decoding; `.success` carries a 2xx response.
    typealias RawOutcome = AppStoreOutcome<HTTPResponse>

    /// How one HTTP answer (or its absence) is judged.
    enum Verdict {
        case done(RawOutcome)
        case retry(RetryableFailure)
        /// With the raw `Retry-After` value.
        case rateLimited(String?)
        case unauthorized
    }

    private func send(
        _ endpoint: AppStoreEndpoint, _ environment: AppStoreEnvironment, path: String,
        query: [(name: String, value: String)]
    ) async -> RawOutcome {
        let url = Self.url(configuration.baseURL(for: environment), path: path, query: query)
        return await perform(RateLimitKey(endpoint, environment), authorized: true) { token in
            var headers: [(name: String, value: String)] = [("Accept", "application/json"), ("User-Agent", Self.userAgent)]
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            return HTTPRequest(method: "GET", url: url, headers: headers, timeout: configuration.requestTimeout)
        } judge: { Self.judgeServerAPI($0) }
    }

    /// Sends with the rate limiter, the bearer token (one fresh token after a 401) and retries
    /// under ``RetryPolicy``. With `deadline`, no attempt starts at or after it: waits and
    /// retries end there (the last failure, or `.rateLimited`, is returned).
    func perform(
        _ key: RateLimitKey, authorized: Bool, deadline: Date? = nil, request: (String?) -> HTTPRequest,
        judge: (HTTPResponse) -> Verdict
    ) async -> RawOutcome {
        let policy = configuration.retryPolicy
        let started = clock.now()
        var attempt = 0
        var refreshedToken = false
        var lastFailure = RetryableFailure.timeout
        // After a failure (not a 429), a limiter slot past the wait left returns that failure:
        // the pacing is churnwatch's own, Apple did not say 429.
        var failedBefore = false
        func remainingWait() -> TimeInterval {
            let budget = policy.maxTotalWait - clock.now().timeIntervalSince(started)
            guard let deadline else { return budget }
            return min(budget, deadline.timeIntervalSince(clock.now()))
        }

        while true {
            attempt += 1
            do {
                switch try await limiter.acquire(key, maxWait: max(0, remainingWait())) {
                case .proceed: break
                case .notBefore(let date): return failedBefore ? .retryable(lastFailure) : .rateLimited(until: date)
                }
            } catch {
                return .retryable(.connection("cancelled"))
            }
            if let deadline, clock.now() >= deadline { return .retryable(lastFailure) }

            var token: String?
            if authorized {
                do { token = try tokens.token() } catch {
                    return .unauthorized
                }
            }
            let verdict: Verdict
            let sentAt = clock.now()
            do {
                verdict = judge(try await transport.send(request(token)))
            } catch HTTPTransportError.untrustedServer(let detail) {
                logger.error("\(AppStoreOutcomeMessages.untrustedServer(detail))")
                return .untrustedServer(detail)
            } catch let error as HTTPTransportError {
                verdict = .retry(error == .timeout ? .timeout : .connection(Self.describe(error)))
            } catch is CancellationError {
                return .retryable(.connection("cancelled"))
            } catch {
                verdict = .retry(.connection(Self.describe(error)))
            }

            switch verdict {
            case .done(let outcome):
                return outcome
            case .unauthorized:
                guard authorized, !refreshedToken, let token else {
                    logger.error("\(AppStoreOutcomeMessages.unauthorized)")
                    return .unauthorized
                }
                refreshedToken = true
                tokens.invalidate(token)
                attempt -= 1 // a fresh token is not a retry
            case .rateLimited(let retryAfter):
                failedBefore = false
                let (until, capped) = await pauseForRateLimit(key, retryAfter: retryAfter, attempt: attempt, sentAt: sentAt)
                if capped || attempt >= policy.maxAttempts || until.timeIntervalSince(clock.now()) > remainingWait() {
                    return .rateLimited(until: until)
                }
            case .retry(let failure):
                lastFailure = failure
                failedBefore = true
                let delay = policy.delay(afterAttempt: attempt, unit: random())
                if attempt >= policy.maxAttempts || delay > remainingWait() {
                    return .retryable(lastFailure)
                }
                logger.debug("retrying \(key) after \(failure) in \(delay)s (attempt \(attempt))")
                guard (try? await clock.sleep(until: clock.now().addingTimeInterval(delay))) != nil else { return .retryable(lastFailure) }
            }
        }
    }

    /// The App Store Server API's status and error-code rules.
    static func judgeServerAPI(_ response: HTTPResponse) -> Verdict {
        if (200..<300).contains(response.status) { return .done(.success(response)) }
        let code = (try? JSONDecoder().decode(ErrorPayload.self, from: response.body))?.errorCode.map(AppStoreErrorCode.init(rawValue:))
        switch response.status {
        case 401:
            return .unauthorized
        case 429:
            return .rateLimited(response.headers["retry-after"])
        case 404:
            if let code, code.isRetryable { return .retry(.http(status: 404, code: code)) }
            return .done(.notFound(code))
        case 500...599:
            return .retry(.http(status: response.status, code: code))
        case 400..<500:
            if let code, code.isRetryable { return .retry(.http(status: response.status, code: code)) }
            return .done(.badRequest(code))
        default:
            return .done(.malformedResponse("unexpected HTTP status \(response.status)"))
        }
    }
}
