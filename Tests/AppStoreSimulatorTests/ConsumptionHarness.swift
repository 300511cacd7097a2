import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SimHarness {
    /// `PUT /inApps/v2/transactions/consumption/{id}` with a JSON body (or raw bytes), with a
    /// fresh valid token unless `auth` is given (`""` sends none).
    func sendConsumption(
        _ transactionId: String, _ body: [String: Any] = [:], raw: Data? = nil, sandbox: Bool = false, auth: String? = nil,
        method: String = "PUT"
    ) async throws -> Response {
        let path = "/inApps/v2/transactions/consumption/\(transactionId)"
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(sandbox ? sandboxPort : port)\(path)")!)
        req.httpMethod = method
        if method != "GET" { req.httpBody = try raw ?? JSONSerialization.data(withJSONObject: body) }
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let t = try auth ?? self.token()
        if !t.isEmpty { req.setValue("Bearer \(t)", forHTTPHeaderField: "Authorization") }
        return try await SimHarness.send(req, timeout: 20)
    }

    /// `GET /_sim/truth/consumption` (default window start..now).
    func consumptionTruth(from: Int64? = nil, to: Int64? = nil) async throws -> [String: Any] {
        var q: [String] = []
        if let from { q.append("from=\(SimTime.format(from))") }
        if let to { q.append("to=\(SimTime.format(to))") }
        let r = try await get("/_sim/truth/consumption" + (q.isEmpty ? "" : "?" + q.joined(separator: "&")), token: "")
        return try #require(r.json as? [String: Any])
    }

    /// The truth entry of one request (by subscription and time).
    func consumptionTruth(of r: SimRefundRequest) async throws -> [String: Any] {
        let truth = try await consumptionTruth(from: r.time, to: r.time + 1)
        let requests = truth["requests"] as? [[String: Any]] ?? []
        return try #require(requests.first {
            $0["original_transaction_id"] as? String == population.originalTransactionId(r.subscriber)
        })
    }

    /// Sets the simulated clock.
    func setClock(_ t: Int64) async throws {
        let r = try await post("/_sim/clock?set=\(SimTime.format(t))")
        guard r.status == 200 else { throw HarnessError.status(r.status, r.text) }
    }

    /// Production refund requests (no payload fault) whose generated decision is `decision`,
    /// requested at or after `after`, by time.
    func refundRequests(decision: TimelineEvent.Kind, after: Int64) -> [SimRefundRequest] {
        productionSubscribers.filter { service.fault($0) == nil }
            .flatMap { population.refundRequests($0) }
            .filter { $0.decision == decision && $0.time >= after }
            .sorted { $0.time < $1.time }
    }
}

/// A body Apple accepts, with the given refund preference.
func consumptionBody(_ preference: String? = nil) -> [String: Any] {
    var b: [String: Any] = ["customerConsented": true, "sampleContentProvided": false, "deliveryStatus": "DELIVERED"]
    if let preference { b["refundPreference"] = preference }
    return b
}
