import AppStoreModels
import Foundation

/// Apple accepted consumption information (HTTP 202): it will weigh it in the refund decision.
public struct ConsumptionAccepted: Sendable, Hashable {
    /// The HTTP status Apple answered with (202).
    public var status: Int
}

extension AppStoreServerAPIClient {
    /// Send Consumption Information: `PUT /inApps/v2/transactions/consumption/{transactionId}`,
    /// the answer to a `CONSUMPTION_REQUEST` (docs/apple-api.md, "Refund requests").
    ///
    /// Apple takes answers for 12 hours after the request: no attempt starts once `timeLeft`
    /// has passed (from now, by this client's clock), so a retry (429, 5xx, a timeout) never
    /// lands late. A duration, not a date: the caller's clock may be a run's `--as-of` moment,
    /// not this client's. Apple's 400s come back typed:
    /// ``AppStoreErrorCode/invalidCustomerConsented`` (4000035) and the other 4000xxx.
    public func sendConsumptionInformation(
        transactionId: String, _ body: ConsumptionRequest, environment: AppStoreEnvironment? = nil, timeLeft: TimeInterval
    ) async -> AppStoreOutcome<ConsumptionAccepted> {
        let deadline = clock.now().addingTimeInterval(timeLeft)
        let env = environment ?? configuration.environment
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload: Data
        do { payload = try encoder.encode(body) } catch {
            return .malformedResponse("cannot encode the consumption information")
        }
        let url = Self.url(configuration.baseURL(for: env), path: "/inApps/v2/transactions/consumption/\(Self.escape(transactionId))",
                           query: [])
        let response = await perform(RateLimitKey(.consumption, env), authorized: true, deadline: deadline) { token in
            var headers: [(name: String, value: String)] = [
                ("Content-Type", "application/json"), ("Accept", "application/json"), ("User-Agent", Self.userAgent),
            ]
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            return HTTPRequest(method: "PUT", url: url, headers: headers, body: payload, timeout: configuration.requestTimeout)
        } judge: { Self.judgeServerAPI($0) }
        guard case .success(let http) = response else { return response.failure() }
        return .success(ConsumptionAccepted(status: http.status))
    }
}
