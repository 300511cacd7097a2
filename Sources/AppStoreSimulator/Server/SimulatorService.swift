import AppStoreModels
import Foundation
import Synchronization
import NIOCore

/// The simulator's behaviour behind HTTP: routing, auth, limits, faults, Apple's endpoints and the
/// `/_sim` control and truth endpoints. Thread-safe; answers are computed synchronously.
public final class SimulatorService: Sendable {
    public let population: Population
    public let identity: SimulatorIdentity
    public let clock: SimClock
    public let options: SimulatorOptions
    let verifier: APITokenVerifier
    let header: ByteBuffer
    let rogueHeader: ByteBuffer
    /// Per subscriber: 0 no fault, else index + 1 into ``SimulatorOptions/faultKinds``.
    private let faultIndex: [UInt8]
    let stats = Mutex(SimStats())
    private let buckets = Mutex([String: TokenBucket]())
    private let tokens = Mutex([String: Int64]())
    private let requestCounter = Mutex<UInt64>(0)
    let cache: SignedCache
    let notificationIndexBox = Mutex<NotificationIndex?>(nil)

    public init(population: Population, identity: SimulatorIdentity, clock: SimClock, options: SimulatorOptions) {
        self.population = population
        self.identity = identity
        self.clock = clock
        self.options = options
        verifier = APITokenVerifier(
            issuerId: identity.issuerId, keyId: identity.keyId, bundleId: population.config.bundleId,
            publicKey: identity.apiKey.publicKey, requireIssuedAt: options.requireIssuedAt)
        header = ByteBuffer(string: identity.chain.encodedHeader + ".")
        rogueHeader = ByteBuffer(string: identity.rogueChain.encodedHeader + ".")
        let kinds = options.faultKinds
        faultIndex = (0..<population.count).map { i in
            guard options.faultRate > 0, !kinds.isEmpty else { return 0 }
            var r = SimRandom(population.config.seed, UInt64(i), 99)
            guard r.chance(options.faultRate) else { return 0 }
            return UInt8(Int(r.next() % UInt64(kinds.count)) + 1)
        }
        cache = SignedCache(capacity: options.cacheCapacity)
    }

    /// The payload fault subscription `i` is served with, if any.
    public func fault(_ i: Int) -> PayloadFault? {
        let f = faultIndex[i]
        return f == 0 ? nil : options.faultKinds[Int(f) - 1]
    }

    // MARK: Routing

    public func handle(_ req: SimRequest) -> SimResponse {
        if req.path.hasPrefix("/_sim/") {
            let r = control(req)
            stats.withLock { $0.count("sim", r.status) }
            return r
        }
        if req.path == "/verifyReceipt" {
            let r = verifyReceipt(req)
            stats.withLock { $0.count("verifyReceipt", r.status) }
            return r
        }
        guard req.path.hasPrefix("/inApps/") else {
            stats.withLock { $0.count("other", 404) }
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

    private func inApps(_ req: SimRequest, endpoint: String, id: String?) -> SimResponse {
        let wallMs = SimClock.wallNow()
        if let rejection = authenticate(req.authorization, wallSeconds: wallMs / 1000) {
            stats.withLock {
                $0.count(endpoint, 401)
                $0.authRejections[rejection.rawValue, default: 0] += 1
            }
            return SimResponse(status: 401)
        }
        if let rate = options.rate, rate > 0 {
            let key = req.environment.rawValue + "/" + endpoint
            let now = Double(wallMs) / 1000
            let (ok, retryAt) = buckets.withLock { b -> (Bool, Double) in
                var bucket = b[key] ?? TokenBucket(rate: rate, burst: options.burst ?? rate, now: now)
                let r = bucket.take(now: now)
                b[key] = bucket
                return r
            }
            if !ok {
                stats.withLock {
                    $0.count(endpoint, 429)
                    $0.rateLimited += 1
                }
                var r = SimResponse.error(.rateLimitExceeded)
                r.headers.append(("retry-after", String(Int64((retryAt * 1000).rounded(.up)))))
                return r
            }
        }
        if options.dropRate > 0 || options.timeoutRate > 0 || options.errorRate > 0 {
            let u = nextUnit()
            if u < options.dropRate {
                stats.withLock { $0.faults["dropped_connection", default: 0] += 1 }
                var r = SimResponse(status: 0)
                r.disposition = .drop
                return r
            }
            if u < options.dropRate + options.timeoutRate {
                stats.withLock { $0.faults["timeout", default: 0] += 1 }
                var r = SimResponse(status: 0)
                r.disposition = .hang(options.timeoutHoldMs)
                return r
            }
            if u < options.dropRate + options.timeoutRate + options.errorRate {
                stats.withLock {
                    $0.faults["internal_error", default: 0] += 1
                    $0.count(endpoint, 500)
                }
                return .error(.generalInternalRetryable)
            }
        }
        let now = clock.now()
        let response: SimResponse
        do throws(AppleError) {
            guard let id else { throw AppleError(404, 4_040_000, "Not found.") }
            switch endpoint {
            case "subscriptions": response = try statuses(id: id, query: req.query, env: req.environment, now: now)
            case "history": response = try history(id: id, query: req.query, env: req.environment, now: now)
            case "transactions": response = try transactionInfo(id: id, env: req.environment, now: now)
            case "refund_lookup": response = try refunds(id: id, query: req.query, env: req.environment, now: now)
            case "notification_history": response = try notificationHistory(req, now: now)
            case "consumption": response = try sendConsumption(req, id: id, now: now)
            default: throw AppleError(404, 4_040_000, "Not found.")
            }
        } catch {
            stats.withLock { $0.count(endpoint, error.httpStatus) }
            return error.httpStatus == 404 && error.code == 4_040_000 ? SimResponse(status: 404) : .error(error)
        }
        stats.withLock { $0.count(endpoint, response.status) }
        return response
    }

    private func authenticate(_ authorization: String?, wallSeconds: Int64) -> APITokenVerifier.Rejection? {
        guard let authorization else { return .missing }
        if let exp = tokens.withLock({ $0[authorization] }) {
            return exp > wallSeconds ? nil : .expired
        }
        do {
            let exp = try verifier.verify(authorization: authorization, now: wallSeconds)
            tokens.withLock { t in
                if t.count > 4096 { t.removeAll(keepingCapacity: true) }
                t[authorization] = exp
            }
            return nil
        } catch {
            return error
        }
    }
}
