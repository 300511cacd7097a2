import AppStoreModels
import Foundation
import Synchronization
import NIOCore

/// The simulator's behaviour behind HTTP: routing, auth, limits, faults, Apple's endpoints and the
/// `/_sim` control and truth endpoints. Thread-safe; answers are computed synchronously.
///
/// It serves one or more apps (``apps``) under one team key, as Apple does: the token's `bid`
/// names the app a request reads (``SimApp``); rate limits are per app, endpoint and environment.
/// ``population``, ``fault(_:)`` and ``signedNotification(_:_:)`` are the first app's.
public final class SimulatorService: Sendable {
    public let apps: [SimApp]
    public let identity: SimulatorIdentity
    public let clock: SimClock
    public let options: SimulatorOptions
    let verifier: APITokenVerifier
    private let buckets = Mutex([BucketKey: TokenBucket]())
    /// Verified tokens: the `Authorization` value → its `exp` and app.
    private let tokens = Mutex([String: VerifiedToken]())
    private let requestCounter = Mutex<UInt64>(0)
    /// Environments in an outage (`POST /_sim/outage`): every `/inApps` request there is answered
    /// with this status (500 or 503) before anything else, until switched off.
    let outages = Mutex([SimEnvironment: Int]())

    struct BucketKey: Hashable {
        var app: Int
        var environment: SimEnvironment
        var endpoint: String
    }

    struct VerifiedToken {
        var expiresAt: Int64
        var app: Int
    }

    /// A simulator serving one app.
    public convenience init(population: Population, identity: SimulatorIdentity, clock: SimClock, options: SimulatorOptions) {
        self.init(populations: [population], identity: identity, clock: clock, options: options)
    }

    /// A simulator serving one app per population (distinct bundle ids; ``PopulationConfig/forApp(_:)``).
    public init(populations: [Population], identity: SimulatorIdentity, clock: SimClock, options: SimulatorOptions) {
        precondition(!populations.isEmpty && Set(populations.map(\.config.bundleId)).count == populations.count)
        apps = populations.map { SimApp(population: $0, identity: identity, clock: clock, options: options) }
        self.identity = identity
        self.clock = clock
        self.options = options
        verifier = APITokenVerifier(
            issuerId: identity.issuerId, keyId: identity.keyId, bundleIds: populations.map(\.config.bundleId),
            publicKey: identity.apiKey.publicKey, requireIssuedAt: options.requireIssuedAt)
    }

    /// The first app's population.
    public var population: Population { apps[0].population }

    /// The app with this bundle id, if served.
    public func app(bundleId: String) -> SimApp? { apps.first { $0.bundleId == bundleId } }

    /// The payload fault subscription `i` of the first app is served with, if any.
    public func fault(_ i: Int) -> PayloadFault? { apps[0].fault(i) }

    /// The first app's notification of change `k` of subscription `i` (``SimApp/signedNotification(_:_:)``).
    public func signedNotification(_ i: Int, _ k: Int) -> String { apps[0].signedNotification(i, k) }

    // MARK: Routing

    public func handle(_ req: SimRequest) -> SimResponse {
        if req.path.hasPrefix("/_sim/") {
            let r = control(req)
            apps[0].stats.withLock { $0.count("sim", r.status) }
            return r
        }
        if req.path == "/verifyReceipt" {
            let app = receiptApp(req)
            let r = app.verifyReceipt(req)
            app.stats.withLock { $0.count("verifyReceipt", r.status) }
            return r
        }
        guard req.path.hasPrefix("/inApps/") else {
            apps[0].stats.withLock { $0.count("other", 404) }
            return SimResponse(status: 404)
        }
        let (endpoint, id) = SimulatorService.route(req.path)
        var r = inApps(req, endpoint: endpoint, id: id)
        if options.latencyMs > 0 || options.latencyJitterMs > 0 {
            r.delayMs = options.latencyMs + (options.latencyJitterMs > 0 ? Int.random(in: 0...options.latencyJitterMs) : 0)
        }
        return r
    }

    static func route(_ path: String) -> (String, String?) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // ["", "inApps", "v1", "subscriptions", "{id}"]
        if parts.count == 5, parts[2] == "v1", parts[3] == "subscriptions" { return ("subscriptions", parts[4]) }
        if parts.count == 5, parts[2] == "v2", parts[3] == "history" { return ("history", parts[4]) }
        if parts.count == 5, parts[2] == "v1", parts[3] == "transactions" { return ("transactions", parts[4]) }
        if parts.count == 5, parts[2] == "v1", parts[3] == "notifications", parts[4] == "history" {
            return ("notification_history", "")
        }
        if parts.count == 6, parts[2] == "v2", parts[3] == "refund", parts[4] == "lookup" { return ("refund_lookup", parts[5]) }
        if parts.count == 6, parts[2] == "v2", parts[3] == "transactions", parts[4] == "consumption" {
            return ("consumption", parts[5])
        }
        // ["", "inApps", "v1", "messaging", ...]: the Retention Messaging API; the id is the rest of the path.
        if parts.count >= 5, parts[2] == "v1", parts[3] == "messaging" { return ("messaging", parts[4...].joined(separator: "/")) }
        return ("other", nil)
    }

    private func nextUnit() -> Double {
        let n = requestCounter.withLock { c -> UInt64 in
            c &+= 1
            return c
        }
        var r = SimRandom(population.config.seed, n, 5)
        return r.unit()
    }

    /// Auth (401; the token's `bid` picks the app), the app's rate limit (429), request faults,
    /// then the app's endpoint. Requests that name no app are counted in the first app's stats.
    private func inApps(_ req: SimRequest, endpoint: String, id: String?) -> SimResponse {
        if let status = outages.withLock({ $0[req.environment] }) {
            apps[0].stats.withLock {
                $0.faults["outage", default: 0] += 1
                $0.count(endpoint, status)
            }
            return .error(AppleError(status, 5_000_001, "An unknown error occurred. Please try again."))
        }
        let wallMs = SimClock.wallNow()
        let index: Int
        switch authenticate(req.authorization, wallSeconds: wallMs / 1000) {
        case .failure(let rejection):
            apps[0].stats.withLock {
                $0.count(endpoint, 401)
                $0.authRejections[rejection.rawValue, default: 0] += 1
            }
            return SimResponse(status: 401)
        case .success(let i):
            index = i
        }
        let app = apps[index]
        if let refusal = rateLimit(app: index, environment: req.environment, endpoint: endpoint, wallMs: wallMs) {
            return refusal
        }
        if let fault = requestFault(app, endpoint: endpoint) { return fault }
        return app.answer(req, endpoint: endpoint, id: id, now: clock.now())
    }

    /// The 429 when the app's bucket of this endpoint and environment is empty, else nil.
    private func rateLimit(app: Int, environment: SimEnvironment, endpoint: String, wallMs: Int64) -> SimResponse? {
        guard let rate = options.rate, rate > 0 else { return nil }
        let key = BucketKey(app: app, environment: environment, endpoint: endpoint)
        let now = Double(wallMs) / 1000
        let (ok, retryAt) = buckets.withLock { b -> (Bool, Double) in
            var bucket = b[key] ?? TokenBucket(rate: rate, burst: options.burst ?? rate, now: now)
            let r = bucket.take(now: now)
            b[key] = bucket
            return r
        }
        if ok { return nil }
        apps[app].stats.withLock {
            $0.count(endpoint, 429)
            $0.rateLimited += 1
        }
        var r = SimResponse.error(.rateLimitExceeded)
        r.headers.append(("retry-after", String(Int64((retryAt * 1000).rounded(.up)))))
        return r
    }

    /// A dropped or held connection or a 500, drawn per request; nil when none.
    private func requestFault(_ app: SimApp, endpoint: String) -> SimResponse? {
        guard options.dropRate > 0 || options.timeoutRate > 0 || options.errorRate > 0 else { return nil }
        let u = nextUnit()
        if u < options.dropRate {
            app.stats.withLock { $0.faults["dropped_connection", default: 0] += 1 }
            var r = SimResponse(status: 0)
            r.disposition = .drop
            return r
        }
        if u < options.dropRate + options.timeoutRate {
            app.stats.withLock { $0.faults["timeout", default: 0] += 1 }
            var r = SimResponse(status: 0)
            r.disposition = .hang(options.timeoutHoldMs)
            return r
        }
        if u < options.dropRate + options.timeoutRate + options.errorRate {
            app.stats.withLock {
                $0.faults["internal_error", default: 0] += 1
                $0.count(endpoint, 500)
            }
            return .error(.generalInternalRetryable)
        }
        return nil
    }

    /// The app a valid token names (its index), or why the token is refused.
    private func authenticate(_ authorization: String?, wallSeconds: Int64) -> Result<Int, APITokenVerifier.Rejection> {
        guard let authorization else { return .failure(.missing) }
        if let known = tokens.withLock({ $0[authorization] }) {
            return known.expiresAt > wallSeconds ? .success(known.app) : .failure(.expired)
        }
        do {
            let (exp, app) = try verifier.verifyToken(authorization: authorization, now: wallSeconds)
            tokens.withLock { t in
                if t.count > 4096 { t.removeAll(keepingCapacity: true) }
                t[authorization] = VerifiedToken(expiresAt: exp, app: app)
            }
            return .success(app)
        } catch {
            return .failure(error)
        }
    }
}
