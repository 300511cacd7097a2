import AppStoreModels
import Foundation

extension SimApp {
    // MARK: verifyReceipt

    func verifyReceipt(_ req: SimRequest) -> SimResponse {
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

    /// This app's `/_sim` endpoints (the clock and `/_sim/info` are the simulator's):
    /// stats, truth, events, notifications, refund requests, offers, the cancel page.
    func control(_ req: SimRequest, query q: [String: String]) -> SimResponse {
        let bad = SimResponse.badRequest
        switch (req.method, req.path) {
        case ("GET", "/_sim/stats"):
            return .json(200, stats.withLock { $0.json() })
        case ("GET", "/_sim/deliveries"):
            guard let d = delivery.withLock({ $0 }) else { return bad("this simulator delivers no notifications (serve --notification-url)") }
            return d.report(self)
        case ("POST", "/_sim/deliveries/url"):
            guard let d = delivery.withLock({ $0 }) else { return bad("this simulator delivers no notifications (serve --notification-url)") }
            guard let url = q["url"], let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host != nil else {
                return bad("url wants an http(s) URL")
            }
            let sandbox = q["environment"] == "Sandbox"
            guard q["environment"] == nil || sandbox || q["environment"] == "Production" else { return bad("environment is Production or Sandbox") }
            d.setURL(url, sandbox: sandbox)
            return .json(200, ["url": url, "environment": sandbox ? "Sandbox" : "Production"])
        case ("GET", "/_sim/truth"):
            var at = clock.now()
            if let s = q["at"] {
                guard let t = SimTime.parse(s) else { return bad("at wants an ISO 8601 time") }
                at = t
            }
            return .json(200, TruthReport.truth(population, at: at, fault: { self.fault($0)?.rawValue }))
        case ("GET", "/_sim/truth/consumption"):
            return consumptionTruth(q) ?? bad("from and to want ISO 8601 times")
        case ("POST", "/_sim/truth/at"):
            return truthAt(req) ?? bad("POST /_sim/truth/at wants [{\"original_transaction_id\": ID, \"at\": ISO8601}, ...]")
        case ("GET", "/_sim/events"):
            guard let (from, to) = timeWindow(q) else { return bad("from and to want ISO 8601 times") }
            return .json(200, TruthReport.events(population, from: from, to: to, notification: notificationUUID(of:)))
        case ("POST", "/_sim/offers/redeem"):
            return redeemOffer(req) ?? bad(
                "POST /_sim/offers/redeem wants {\"original_transaction_id\": ID, \"at\": ISO8601 at or after the clock, \"offer_id\": optional}")
        case ("GET", "/_sim/offers"):
            var w = JSONWriter()
            w.beginObject()
            w.beginArray("redemptions")
            for r in population.offerRedemptions { Self.write(r, population: population, to: &w) }
            w.endArray()
            w.endObject()
            return .json(200, w.bytes)
        case ("POST", "/_sim/realtime/sign"):
            return realtimeSign(req) ?? bad("POST /_sim/realtime/sign wants {\"original_transaction_id\": ID of this app, optional product_id, user_locale, request_identifier, signed_date (ISO 8601), environment, app_apple_id}")
        case ("GET", "/_sim/retention/views"):
            return retentionViews(q) ?? bad("from and to want ISO 8601 times")
        case ("GET", "/_sim/retention/summary"):
            return retentionSummary(q) ?? bad("from and to want ISO 8601 times")
        case ("GET", "/_sim/retention/potential"):
            return retentionPotential(q) ?? bad("from and to want ISO 8601 times")
        case ("GET", "/_sim/notifications"):
            return notificationsTruth(q) ?? bad("from and to want ISO 8601 times")
        default:
            return SimResponse(status: 404)
        }
    }

    private struct TruthAtQuery: Decodable {
        var original_transaction_id: String
        var at: String
    }

    /// `POST /_sim/truth/at`: each named subscription's true state at its own moment (nil: bad input).
    private func truthAt(_ req: SimRequest) -> SimResponse? {
        guard let body = try? JSONDecoder().decode([TruthAtQuery].self, from: Data(req.body)) else { return nil }
        var queries: [(subscriber: Int, at: Int64)] = []
        for q in body {
            guard let loc = population.locate(transactionId: q.original_transaction_id), loc.transaction == 0,
                  let at = SimTime.parse(q.at) else { return nil }
            queries.append((loc.subscriber, at))
        }
        return .json(200, TruthReport.states(population, at: queries))
    }

    private struct RedeemBody: Decodable {
        var original_transaction_id: String
        var at: String?
        var offer_id: String?
    }

    /// `POST /_sim/offers/redeem`: the customer redeemed a delivered save offer (nil: bad input).
    /// A redemption in the simulated past is refused: what was served stays served.
    private func redeemOffer(_ req: SimRequest) -> SimResponse? {
        guard let body = try? JSONDecoder().decode(RedeemBody.self, from: Data(req.body)),
            let loc = population.locate(transactionId: body.original_transaction_id), loc.transaction == 0
        else { return nil }
        let now = clock.now()
        guard let at = body.at.map(SimTime.parse) ?? now, at >= now else { return nil }
        let r = population.redeemOffer(
            loc.subscriber, at: at, effect: options.offerEffect, offerId: body.offer_id, effectByOffer: options.offerEffectByOffer)
        if r.saved {
            cache.remove(loc.subscriber)
            notificationIndexBox.withLock { $0 = nil }
        }
        var w = JSONWriter()
        Self.write(r, population: population, to: &w)
        return .json(200, w.bytes)
    }

    static func write(_ r: OfferRedemption, population: Population, to w: inout JSONWriter) {
        w.beginObject()
        w.string("original_transaction_id", population.originalTransactionId(r.subscriber))
        w.date("at", r.at)
        w.bool("eligible", r.eligible)
        w.bool("saved", r.saved)
        w.bool("would_have_stayed", r.wouldHaveStayed)
        w.bool("changed_outcome", r.changedOutcome)
        w.string("offer_id", r.offerId)
        w.beginObject("saved_if")
        for (id, saved) in r.savedIf.sorted(by: { $0.key < $1.key }) { w.bool(id, saved) }
        w.endObject()
        w.endObject()
    }
}
