import AppStoreModels
import Foundation

extension SimulatorService {
    // MARK: /_sim

    /// The clock and `/_sim/info` (the simulator's); every other `/_sim` endpoint is the app's
    /// that `bundle_id` names (the first app by default).
    func control(_ req: SimRequest) -> SimResponse {
        let bad = SimResponse.badRequest
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
            guard let viewer = apps[0].viewer.withLock({ $0 }) else { return clockBody() }
            // The answer waits until the cancel page's views up to the new moment are decided.
            let target = clock.rawNow()
            var r = SimResponse(status: 200)
            r.deferred = { [self] in
                await viewer.catchUp(to: target)
                return clockBody()
            }
            return r
        case ("GET", "/_sim/info"):
            return info()
        case ("POST", "/_sim/outage"):
            // ?environment=Sandbox&status=503 starts an outage there (500 or 503); status=0 ends it.
            guard let e = q["environment"].flatMap(SimEnvironment.init(rawValue:)), let status = q["status"].flatMap(Int.init),
                  [0, 500, 503].contains(status) else {
                return bad("POST /_sim/outage wants ?environment=Production|Sandbox&status=500|503 (0 ends the outage)")
            }
            outages.withLock { $0[e] = status == 0 ? nil : status }
            return .json(200, Array("{}".utf8))
        default:
            switch selectedApp(req, query: q) {
            case .success(let app): return app.control(req, query: q)
            case .failure(let message): return bad(message.text)
            }
        }
    }

    /// `{"now": ISO}`.
    private func clockBody() -> SimResponse {
        var w = JSONWriter()
        w.beginObject()
        w.date("now", clock.now())
        w.endObject()
        return .json(200, w.bytes)
    }

    struct SelectionError: Error {
        var text: String
    }

    /// The app a `/_sim` request names: the `bundle_id` query parameter, else the `bundle_id`
    /// field of a JSON object body, else the first app.
    func selectedApp(_ req: SimRequest, query q: [String: String]) -> Result<SimApp, SelectionError> {
        struct BundleField: Decodable {
            var bundle_id: String?
        }
        var bundleId = q["bundle_id"]
        let opening = req.body.first { ![UInt8(ascii: " "), 9, 10, 13].contains($0) }
        if bundleId == nil, req.method == "POST", opening == UInt8(ascii: "{") {
            bundleId = (try? JSONDecoder().decode(BundleField.self, from: Data(req.body)))?.bundle_id
        }
        guard let bundleId else { return .success(apps[0]) }
        guard let app = app(bundleId: bundleId) else {
            return .failure(SelectionError(
                text: "unknown bundle_id \(bundleId): this simulator serves \(apps.map(\.bundleId).joined(separator: ", "))"))
        }
        return .success(app)
    }

    /// `GET /_sim/info`: the first app's population and the clock, and every app served.
    private func info() -> SimResponse {
        let population = apps[0].population
        var w = JSONWriter()
        w.beginObject()
        w.int("subscribers", Int64(population.count))
        w.string("seed", String(population.config.seed))
        w.date("start", population.config.start)
        w.date("now", clock.now())
        w.string("bundle_id", population.config.bundleId)
        w.int("app_apple_id", population.config.appAppleId)
        w.beginArray("apps")
        for app in apps {
            w.beginObject()
            w.string("bundle_id", app.bundleId)
            w.int("app_apple_id", app.population.config.appAppleId)
            w.int("subscribers", Int64(app.population.count))
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return .json(200, w.bytes)
    }

    // MARK: verifyReceipt

    /// The app whose customer a `verifyReceipt` body's receipt is (the first app when it is
    /// nobody's: that app answers 21002 or 21003).
    func receiptApp(_ req: SimRequest) -> SimApp {
        guard apps.count > 1, req.method == "POST",
            let body = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: Data(req.body))
        else { return apps[0] }
        return apps.first { $0.population.subscriber(forReceipt: body.receiptData) != nil } ?? apps[0]
    }
}
