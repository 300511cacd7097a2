import AppStoreModels
import NIOCore

extension SimApp {
    // MARK: Apple's endpoints

    /// Answers an authenticated, admitted `/inApps` request with this app's data.
    func answer(_ req: SimRequest, endpoint: String, id: String?, now: Int64) -> SimResponse {
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
            case "messaging": response = try messaging(req, path: id, now: now)
            default: throw AppleError(404, 4_040_000, "Not found.")
            }
        } catch {
            stats.withLock { $0.count(endpoint, error.httpStatus) }
            return error.httpStatus == 404 && error.code == 4_040_000 ? SimResponse(status: 404) : .error(error)
        }
        stats.withLock { $0.count(endpoint, response.status) }
        return response
    }

    /// The subscription and transaction an id names in this environment at `now`.
    func resolve(_ id: String, env: SimEnvironment, now: Int64) throws(AppleError) -> (Int, Int) {
        guard !id.isEmpty, id.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), id.utf8.count <= 19 else {
            throw .invalidTransactionId
        }
        guard let (i, k) = population.locate(transactionId: id),
            population.isSandbox(i) == (env == .sandbox), population.exists(i, at: now),
            k < population.state(i, at: now).transactionCount
        else { throw .transactionIdNotFound }
        return (i, k)
    }

    func statuses(id: String, query: [(String, String)], env: SimEnvironment, now: Int64) throws(AppleError)
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
    func writeJWS(_ body: inout StatusBody, _ item: SignedCache.Item, renewal: Bool) {
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

    func signedItem(_ sub: Int, at now: Int64) -> SignedCache.Item {
        if let hit = cache.get(sub, at: now) {
            stats.withLock { $0.cacheHits += 1 }
            return hit
        }
        let s = population.state(sub, at: now)
        let tx = population.transactionPayload(sub, s.latest, originalPurchaseDate: s.originalPurchaseDate, signedAt: now)
        let renewal = population.renewalPayload(sub, s)
        let item = compactItem(sub, at: now, status: s.status, renewal: renewal, transaction: tx)
        cache.put(sub, item)
        stats.withLock {
            $0.cacheMisses += 1
            $0.signatures += 2
            if let f = fault(sub) { $0.faults[f.rawValue, default: 0] += 1 }
        }
        return item
    }

    /// The transaction payload JSON as served to `sub` (with its fault applied).
    func payloadBytes(_ sub: Int, transaction p: JWSTransactionDecodedPayload) -> [UInt8] {
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
    func payloadBytes(_ sub: Int, renewal p: JWSRenewalInfoDecodedPayload) -> [UInt8] {
        var p = p
        let f = fault(sub)
        if f == .unknownValues {
            if p.rawExpirationIntent != nil { p.rawExpirationIntent = 9 }
            if p.rawPriceIncreaseStatus != nil { p.rawPriceIncreaseStatus = 7 }
            p.rawRenewalBillingPlanType = "FUTURE_PLAN"
        }
        return encode(p, extraFields: f == .unknownValues)
    }

    func encode(_ value: some Encodable, extraFields: Bool) -> [UInt8] {
        var bytes = (try? SigningChain.encode(value)) ?? Array("{}".utf8)
        if extraFields, bytes.last == UInt8(ascii: "}") {
            bytes.removeLast()
            bytes.append(contentsOf: ",\"zzFutureField\":{\"flags\":[1,2,3],\"note\":\"added by a future API\"},\"zzFutureFlag\":true}".utf8)
        }
        return bytes
    }

    /// A compact JWS of `payload` for `sub`: signed by the main or rogue chain, or truncated.
    func jws(_ sub: Int, payload: [UInt8]) -> String {
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

    func compactItem(
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

    func signedString(_ sub: Int, transaction p: JWSTransactionDecodedPayload) -> String {
        stats.withLock {
            $0.signatures += 1
            if let f = fault(sub) { $0.faults[f.rawValue, default: 0] += 1 }
        }
        return jws(sub, payload: payloadBytes(sub, transaction: p))
    }

    func historyItems(_ i: Int, now: Int64) -> [HistoryQuery.Item] {
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

    func signed(_ items: [HistoryQuery.Item], now: Int64) -> [String] {
        items.map { it in
            let s = population.state(it.subscriber, at: now)
            return signedString(it.subscriber, transaction: population.transactionPayload(
                it.subscriber, it.transaction, originalPurchaseDate: s.originalPurchaseDate, signedAt: now))
        }
    }

    func history(id: String, query: [(String, String)], env: SimEnvironment, now: Int64) throws(AppleError)
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

    func transactionInfo(id: String, env: SimEnvironment, now: Int64) throws(AppleError) -> SimResponse {
        let (i, k) = try resolve(id, env: env, now: now)
        let (s, txs) = population.stateAndTransactions(i, at: now)
        let p = population.transactionPayload(i, txs[k], originalPurchaseDate: s.originalPurchaseDate, signedAt: now)
        return .json(200, TransactionInfoResponse(signedTransactionInfo: signedString(i, transaction: p)))
    }

    func refunds(id: String, query: [(String, String)], env: SimEnvironment, now: Int64) throws(AppleError)
        -> SimResponse
    {
        let revision = query.first { $0.0 == "revision" }?.1
        let (i, _) = try resolve(id, env: env, now: now)
        let page = try HistoryQuery.refundPage(historyItems(i, now: now), revision: revision)
        return .json(200, RefundHistoryResponse(
            signedTransactions: signed(page.items, now: now), revision: page.revision, hasMore: page.hasMore))
    }
}
