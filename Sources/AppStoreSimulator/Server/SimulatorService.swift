import AppStoreModels
import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// A request as the HTTP layer hands it over.
public struct SimRequest: Sendable {
    public var method: String
    /// The path without the query.
    public var path: String
    public var query: [(String, String)]
    public var authorization: String?
    public var body: [UInt8]
    /// Which port (Apple host) received it.
    public var environment: SimEnvironment

    public init(method: String, path: String, query: [(String, String)], authorization: String?, body: [UInt8],
                environment: SimEnvironment) {
        self.method = method
        self.path = path
        self.query = query
        self.authorization = authorization
        self.body = body
        self.environment = environment
    }

    /// Splits `/a/b?x=1&y=2` into path and percent-decoded query items.
    public static func split(uri: String) -> (String, [(String, String)]) {
        guard let q = uri.firstIndex(of: "?") else { return (uri, []) }
        let items = uri[uri.index(after: q)...].split(separator: "&").map { pair -> (String, String) in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func dec(_ s: Substring) -> String {
                String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
            }
            return (dec(kv[0]), kv.count > 1 ? dec(kv[1]) : "")
        }
        return (String(uri[..<q]), items)
    }
}

/// What the HTTP layer should do.
public struct SimResponse: Sendable {
    public enum Disposition: Sendable, Equatable {
        case respond
        /// Close the connection without answering.
        case drop
        /// Never answer; close after the given milliseconds.
        case hang(Int)
    }

    public var status: Int
    public var headers: [(String, String)]
    public var body: [ByteBuffer]
    public var disposition: Disposition = .respond
    /// Wait this long before answering.
    public var delayMs = 0

    public init(status: Int, headers: [(String, String)] = [], body: [ByteBuffer] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    static func json(_ status: Int, _ bytes: [UInt8]) -> SimResponse {
        SimResponse(status: status, headers: [("content-type", "application/json")], body: [ByteBuffer(bytes: bytes)])
    }

    static func json(_ status: Int, _ value: some Encodable) -> SimResponse {
        json(status, (try? SigningChain.encode(value)) ?? Array("{}".utf8))
    }

    static func error(_ e: AppleError) -> SimResponse {
        json(e.httpStatus, ErrorPayload(errorCode: e.code, errorMessage: e.message))
    }
}

/// The simulator's behaviour behind HTTP: routing, auth, limits, faults, Apple's endpoints and the
/// `/_sim` control and truth endpoints. Thread-safe; answers are computed synchronously.
public final class SimulatorService: Sendable {
    public let population: Population
    public let identity: SimulatorIdentity
    public let clock: SimClock
    public let options: SimulatorOptions
    let verifier: APITokenVerifier
    private let header: ByteBuffer
    private let rogueHeader: ByteBuffer
    /// Per subscriber: 0 no fault, else index + 1 into ``SimulatorOptions/faultKinds``.
    private let faultIndex: [UInt8]
    private let stats = NIOLockedValueBox(SimStats())
    private let buckets = NIOLockedValueBox([String: TokenBucket]())
    private let tokens = NIOLockedValueBox([String: Int64]())
    private let requestCounter = NIOLockedValueBox<UInt64>(0)
    private let cache: SignedCache

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
            stats.withLockedValue { $0.count("sim", r.status) }
            return r
        }
        if req.path == "/verifyReceipt" {
            let r = verifyReceipt(req)
            stats.withLockedValue { $0.count("verifyReceipt", r.status) }
            return r
        }
        guard req.path.hasPrefix("/inApps/") else {
            stats.withLockedValue { $0.count("other", 404) }
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
        if parts.count == 6, parts[2] == "v2", parts[3] == "refund", parts[4] == "lookup" { return ("refund_lookup", parts[5]) }
        return ("other", nil)
    }

    private func nextUnit() -> Double {
        let n = requestCounter.withLockedValue { c -> UInt64 in
            c &+= 1
            return c
        }
        var r = SimRandom(population.config.seed, n, 5)
        return r.unit()
    }

    private func inApps(_ req: SimRequest, endpoint: String, id: String?) -> SimResponse {
        let wallMs = SimClock.wallNow()
        if let rejection = authenticate(req.authorization, wallSeconds: wallMs / 1000) {
            stats.withLockedValue {
                $0.count(endpoint, 401)
                $0.authRejections[rejection.rawValue, default: 0] += 1
            }
            return SimResponse(status: 401)
        }
        if let rate = options.rate, rate > 0 {
            let key = req.environment.rawValue + "/" + endpoint
            let now = Double(wallMs) / 1000
            let (ok, retryAt) = buckets.withLockedValue { b -> (Bool, Double) in
                var bucket = b[key] ?? TokenBucket(rate: rate, burst: options.burst ?? rate, now: now)
                let r = bucket.take(now: now)
                b[key] = bucket
                return r
            }
            if !ok {
                stats.withLockedValue {
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
                stats.withLockedValue { $0.faults["dropped_connection", default: 0] += 1 }
                var r = SimResponse(status: 0)
                r.disposition = .drop
                return r
            }
            if u < options.dropRate + options.timeoutRate {
                stats.withLockedValue { $0.faults["timeout", default: 0] += 1 }
                var r = SimResponse(status: 0)
                r.disposition = .hang(options.timeoutHoldMs)
                return r
            }
            if u < options.dropRate + options.timeoutRate + options.errorRate {
                stats.withLockedValue {
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
            default: throw AppleError(404, 4_040_000, "Not found.")
            }
        } catch {
            stats.withLockedValue { $0.count(endpoint, error.httpStatus) }
            return error.httpStatus == 404 && error.code == 4_040_000 ? SimResponse(status: 404) : .error(error)
        }
        stats.withLockedValue { $0.count(endpoint, response.status) }
        return response
    }

    private func authenticate(_ authorization: String?, wallSeconds: Int64) -> APITokenVerifier.Rejection? {
        guard let authorization else { return .missing }
        if let exp = tokens.withLockedValue({ $0[authorization] }) {
            return exp > wallSeconds ? nil : .expired
        }
        do {
            let exp = try verifier.verify(authorization: authorization, now: wallSeconds)
            tokens.withLockedValue { t in
                if t.count > 4096 { t.removeAll(keepingCapacity: true) }
                t[authorization] = exp
            }
            return nil
        } catch {
            return error
        }
    }

    // MARK: Apple's endpoints

    /// The subscription and transaction an id names in this environment at `now`.
    private func resolve(_ id: String, env: SimEnvironment, now: Int64) throws(AppleError) -> (Int, Int) {
        guard !id.isEmpty, id.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), id.utf8.count <= 19 else {
            throw .invalidTransactionId
        }
        guard let (i, k) = population.locate(transactionId: id),
            population.isSandbox(i) == (env == .sandbox), population.exists(i, at: now),
            k < population.state(i, at: now).transactionCount
        else { throw .transactionIdNotFound }
        return (i, k)
    }

    private func statuses(id: String, query: [(String, String)], env: SimEnvironment, now: Int64) throws(AppleError)
        -> SimResponse
    {
        var filter: Set<Int32> = []
        for (k, v) in query where k == "status" {
            guard let s = Int32(v), (1...5).contains(s) else { throw .invalidStatus }
            filter.insert(s)
        }
        let (i, _) = try resolve(id, env: env, now: now)
        let subs = population.customerSubscriptions(i).filter { population.exists($0, at: now) }
        let items = subs.map { signedItem($0, at: now) }
        var body = StatusBody(capacity: items.reduce(400) { $0 + Int($1.data.count) * 4 / 3 + 200 })
        body.write("{\"appAppleId\":\(population.config.appAppleId),\"bundleId\":\"\(population.config.bundleId)\",\"data\":[")
        var first = true
        for (sub, item) in zip(subs, items) where filter.isEmpty || filter.contains(item.status) {
            body.write(first ? "" : ",")
            first = false
            body.write("{\"lastTransactions\":[{\"originalTransactionId\":\"\(population.originalTransactionId(sub))\"")
            body.write(",\"signedRenewalInfo\":\"")
            writeJWS(&body, item, renewal: true)
            body.write("\",\"signedTransactionInfo\":\"")
            writeJWS(&body, item, renewal: false)
            body.write("\",\"status\":\(item.status)}],\"subscriptionGroupIdentifier\":\"\(population.groupId(sub))\"}")
        }
        body.write("],\"environment\":\"\(env.rawValue)\"}")
        var r = SimResponse(status: 200, headers: [("content-type", "application/json")])
        r.body = body.finish()
        return r
    }

    /// Writes one JWS of a cached item: shared header, then base64url of payload and signature.
    private func writeJWS(_ body: inout StatusBody, _ item: SignedCache.Item, renewal: Bool) {
        let rl = Int(item.renewalLength), tl = Int(item.transactionLength)
        item.data.withUnsafeBufferPointer { d in
            let payload = renewal ? UnsafeBufferPointer(rebasing: d[0..<rl]) : UnsafeBufferPointer(rebasing: d[rl..<rl + tl])
            switch item.chain {
            case .literal:
                body.write(bytes: payload)
            case .main, .rogue:
                body.share(item.chain == .main ? header : rogueHeader)
                body.writeBase64URL(payload)
                body.write(".")
                let sigStart = rl + tl + (renewal ? 0 : 64)
                body.writeBase64URL(UnsafeBufferPointer(rebasing: d[sigStart..<sigStart + 64]))
            }
        }
    }

    private func signedItem(_ sub: Int, at now: Int64) -> SignedCache.Item {
        if let hit = cache.get(sub, at: now) {
            stats.withLockedValue { $0.cacheHits += 1 }
            return hit
        }
        let s = population.state(sub, at: now)
        let tx = population.transactionPayload(sub, s.latest, originalPurchaseDate: s.originalPurchaseDate, signedAt: now)
        let renewal = population.renewalPayload(sub, s)
        let item = compactItem(sub, at: now, status: s.status, renewal: renewal, transaction: tx)
        cache.put(sub, item)
        stats.withLockedValue {
            $0.cacheMisses += 1
            $0.signatures += 2
            if let f = fault(sub) { $0.faults[f.rawValue, default: 0] += 1 }
        }
        return item
    }

    /// The transaction payload JSON as served to `sub` (with its fault applied).
    private func payloadBytes(_ sub: Int, transaction p: JWSTransactionDecodedPayload) -> [UInt8] {
        var p = p
        let f = fault(sub)
        switch f {
        case .foreignBundle: p.bundleId = "com.example.someone-else"
        case .unknownValues:
            p.rawTransactionReason = "RENEWAL_EXTENDED_FUTURE"
            p.rawInAppOwnershipType = p.rawInAppOwnershipType.map { $0 + "_FUTURE" }
            if p.rawOfferType != nil { p.rawOfferDiscountType = "FUTURE_DISCOUNT" }
        default: break
        }
        return encode(p, extraFields: f == .unknownValues)
    }

    /// The renewal payload JSON as served to `sub` (with its fault applied).
    private func payloadBytes(_ sub: Int, renewal p: JWSRenewalInfoDecodedPayload) -> [UInt8] {
        var p = p
        let f = fault(sub)
        if f == .unknownValues {
            if p.rawExpirationIntent != nil { p.rawExpirationIntent = 9 }
            if p.rawPriceIncreaseStatus != nil { p.rawPriceIncreaseStatus = 7 }
            p.rawRenewalBillingPlanType = "FUTURE_PLAN"
        }
        return encode(p, extraFields: f == .unknownValues)
    }

    private func encode(_ value: some Encodable, extraFields: Bool) -> [UInt8] {
        var bytes = (try? SigningChain.encode(value)) ?? Array("{}".utf8)
        if extraFields, bytes.last == UInt8(ascii: "}") {
            bytes.removeLast()
            bytes.append(contentsOf: ",\"zzFutureField\":{\"flags\":[1,2,3],\"note\":\"added by a future API\"},\"zzFutureFlag\":true}".utf8)
        }
        return bytes
    }

    /// A compact JWS of `payload` for `sub`: signed by the main or rogue chain, or truncated.
    private func jws(_ sub: Int, payload: [UInt8]) -> String {
        do {
            switch fault(sub) {
            case .rogueChain: return try identity.rogueChain.sign(payload: payload)
            case .truncatedJWS:
                let full = try identity.chain.sign(payload: payload)
                return String(full.prefix(full.count * 2 / 3))
            default: return try identity.chain.sign(payload: payload)
            }
        } catch {
            return "signing-failed"
        }
    }

    private func compactItem(
        _ sub: Int, at now: Int64, status: Int32, renewal: JWSRenewalInfoDecodedPayload, transaction: JWSTransactionDecodedPayload
    ) -> SignedCache.Item {
        let r = payloadBytes(sub, renewal: renewal)
        let t = payloadBytes(sub, transaction: transaction)
        let f = fault(sub)
        if f == .truncatedJWS {
            let rs = Array(jws(sub, payload: r).utf8), ts = Array(jws(sub, payload: t).utf8)
            return SignedCache.Item(
                at: now, status: status, chain: .literal, renewalLength: UInt16(rs.count), transactionLength: UInt16(ts.count),
                data: rs + ts)
        }
        let chain = f == .rogueChain ? identity.rogueChain : identity.chain
        var data = r + t
        data.reserveCapacity(r.count + t.count + 128)
        data += (try? chain.signature(payload: r)) ?? [UInt8](repeating: 0, count: 64)
        data += (try? chain.signature(payload: t)) ?? [UInt8](repeating: 0, count: 64)
        return SignedCache.Item(
            at: now, status: status, chain: f == .rogueChain ? .rogue : .main, renewalLength: UInt16(r.count),
            transactionLength: UInt16(t.count), data: data)
    }

    private func signedString(_ sub: Int, transaction p: JWSTransactionDecodedPayload) -> String {
        stats.withLockedValue {
            $0.signatures += 1
            if let f = fault(sub) { $0.faults[f.rawValue, default: 0] += 1 }
        }
        return jws(sub, payload: payloadBytes(sub, transaction: p))
    }

    private func historyItems(_ i: Int, now: Int64) -> [HistoryQuery.Item] {
        var items: [HistoryQuery.Item] = []
        for sub in population.customerSubscriptions(i) where population.exists(sub, at: now) {
            let (_, txs) = population.stateAndTransactions(sub, at: now)
            let family = population.records[sub].flags.contains(.familyShared)
            for tx in txs {
                items.append(HistoryQuery.Item(
                    subscriber: sub, transaction: tx, productId: population.catalog.products[tx.product].id,
                    groupId: population.groupId(sub), familyShared: family))
            }
        }
        return items
    }

    private func signed(_ items: [HistoryQuery.Item], now: Int64) -> [String] {
        items.map { it in
            let s = population.state(it.subscriber, at: now)
            return signedString(it.subscriber, transaction: population.transactionPayload(
                it.subscriber, it.transaction, originalPurchaseDate: s.originalPurchaseDate, signedAt: now))
        }
    }

    private func history(id: String, query: [(String, String)], env: SimEnvironment, now: Int64) throws(AppleError)
        -> SimResponse
    {
        let (q, revision) = try HistoryQuery.parse(query)
        let (i, _) = try resolve(id, env: env, now: now)
        let page = try q.page(historyItems(i, now: now), revision: revision)
        return .json(200, HistoryResponse(
            revision: page.revision, hasMore: page.hasMore, bundleId: population.config.bundleId,
            appAppleId: population.config.appAppleId, rawEnvironment: env.rawValue,
            signedTransactions: signed(page.items, now: now)))
    }

    private func transactionInfo(id: String, env: SimEnvironment, now: Int64) throws(AppleError) -> SimResponse {
        let (i, k) = try resolve(id, env: env, now: now)
        let (s, txs) = population.stateAndTransactions(i, at: now)
        let p = population.transactionPayload(i, txs[k], originalPurchaseDate: s.originalPurchaseDate, signedAt: now)
        return .json(200, TransactionInfoResponse(signedTransactionInfo: signedString(i, transaction: p)))
    }

    private func refunds(id: String, query: [(String, String)], env: SimEnvironment, now: Int64) throws(AppleError)
        -> SimResponse
    {
        let revision = query.first { $0.0 == "revision" }?.1
        let (i, _) = try resolve(id, env: env, now: now)
        let page = try HistoryQuery.refundPage(historyItems(i, now: now), revision: revision)
        return .json(200, RefundHistoryResponse(
            signedTransactions: signed(page.items, now: now), revision: page.revision, hasMore: page.hasMore))
    }

    // MARK: verifyReceipt

    private func verifyReceipt(_ req: SimRequest) -> SimResponse {
        func status(_ s: Int) -> SimResponse {
            .json(200, VerifyReceiptResponse(status: s, environment: req.environment.rawValue))
        }
        guard req.method == "POST" else { return status(21000) }
        guard let body = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: Data(req.body)),
            Population.decodeBase64(body.receiptData) != nil
        else { return status(21002) }
        let now = clock.now()
        guard let i = population.subscriber(forReceipt: body.receiptData), population.exists(i, at: now) else {
            return status(21003)
        }
        if population.isSandbox(i) && req.environment == .production { return status(21007) }
        if !population.isSandbox(i) && req.environment == .sandbox { return status(21008) }
        guard body.password == identity.sharedSecret else { return status(21004) }
        return .json(200, population.verifyReceiptResponse(
            i, at: now, receiptData: body.receiptData, excludeOld: body.excludeOldTransactions ?? false))
    }

    // MARK: /_sim

    private func control(_ req: SimRequest) -> SimResponse {
        func bad(_ message: String) -> SimResponse {
            var w = JSONWriter()
            w.beginObject()
            w.string("error", message)
            w.endObject()
            return .json(400, w.bytes)
        }
        func clockBody() -> SimResponse {
            var w = JSONWriter()
            w.beginObject()
            w.date("now", clock.now())
            w.endObject()
            return .json(200, w.bytes)
        }
        let q = Dictionary(req.query, uniquingKeysWith: { _, last in last })
        switch (req.method, req.path) {
        case ("GET", "/_sim/clock"):
            return clockBody()
        case ("POST", "/_sim/clock"):
            if let a = q["advance"] {
                guard let ms = SimTime.parseDuration(a) else { return bad("advance wants a duration such as 1d, 12h, 90m") }
                clock.advance(by: ms)
            } else if let s = q["set"] {
                guard let ms = SimTime.parse(s) else { return bad("set wants an ISO 8601 time") }
                clock.set(ms)
            } else {
                return bad("POST /_sim/clock wants ?advance=DURATION or ?set=ISO8601")
            }
            return clockBody()
        case ("GET", "/_sim/stats"):
            return .json(200, stats.withLockedValue { $0.json() })
        case ("GET", "/_sim/truth"):
            var at = clock.now()
            if let s = q["at"] {
                guard let t = SimTime.parse(s) else { return bad("at wants an ISO 8601 time") }
                at = t
            }
            return .json(200, TruthReport.truth(population, at: at, fault: { self.fault($0)?.rawValue }))
        case ("GET", "/_sim/events"):
            var from = population.config.start, to = clock.now()
            if let s = q["from"] {
                guard let t = SimTime.parse(s) else { return bad("from wants an ISO 8601 time") }
                from = t
            }
            if let s = q["to"] {
                guard let t = SimTime.parse(s) else { return bad("to wants an ISO 8601 time") }
                to = t
            }
            return .json(200, TruthReport.events(population, from: from, to: to))
        case ("GET", "/_sim/info"):
            var w = JSONWriter()
            w.beginObject()
            w.int("subscribers", Int64(population.count))
            w.string("seed", String(population.config.seed))
            w.date("start", population.config.start)
            w.date("now", clock.now())
            w.string("bundle_id", population.config.bundleId)
            w.int("app_apple_id", population.config.appAppleId)
            w.endObject()
            return .json(200, w.bytes)
        default:
            return SimResponse(status: 404)
        }
    }
}
