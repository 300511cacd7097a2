import AppStoreModels
import Foundation

extension AppStoreServerAPIClient {
    /// Legacy verifyReceipt (deprecated by Apple), for apps that stored only receipt data.
    ///
    /// POSTs `receipt-data`, `password` (the configured shared secret) and
    /// `exclude-old-transactions` to production first (sandbox first when the configured
    /// environment is Sandbox); 21007 resends to sandbox and 21008 to production, once.
    /// 21002, 21005, 21009 and 21100–21199 with `is-retryable` true are retried with backoff,
    /// then reported as ``AppStoreOutcome/retryable(_:)``; other non-zero statuses are
    /// ``AppStoreOutcome/badRequest(_:)`` with the status as code. Status 0 (and 21006, a valid
    /// receipt whose subscription expired) is success.
    public func verifyReceipt(
        _ receiptData: String, excludeOldTransactions: Bool = false
    ) async -> AppStoreOutcome<LegacyReceiptResult> {
        let request = VerifyReceiptRequest(
            receiptData: receiptData, password: configuration.sharedSecret?.value,
            excludeOldTransactions: excludeOldTransactions)
        let body: Data
        do { body = try JSONEncoder().encode(request) } catch {
            return .malformedResponse("cannot encode the request")
        }
        var environment: AppStoreEnvironment = configuration.environment == .sandbox ? .sandbox : .production
        var switched = false
        while true {
            let url = configuration.verifyReceiptURL(for: environment)
            let raw = await perform(RateLimitKey(.verifyReceipt, environment), authorized: false) { _ in
                HTTPRequest(
                    method: "POST", url: url,
                    headers: [("Content-Type", "application/json"), ("Accept", "application/json"), ("User-Agent", "churnwatch/1.0")],
                    body: body, timeout: configuration.requestTimeout)
            } judge: { Self.judgeVerifyReceipt($0) }
            guard case .success(let http) = raw else { return raw.failure() }
            guard let response = try? JSONDecoder().decode(VerifyReceiptResponse.self, from: http.body) else {
                return .malformedResponse("verifyReceipt response is not the expected JSON")
            }
            switch response.status {
            case 21_007 where !switched && environment == .production, 21_008 where !switched && environment == .sandbox:
                switched = true
                environment = environment == .production ? .sandbox : .production
                continue
            default:
                return .success(LegacyReceiptResult(
                    environment: environment, response: response, latestReceipt: response.latestReceipt ?? receiptData))
            }
        }
    }

    /// verifyReceipt answers 200 with a `status`; decide success, retry or failure from it.
    static func judgeVerifyReceipt(_ response: HTTPResponse) -> Verdict {
        switch response.status {
        case 200..<300: break
        case 429: return .rateLimited(response.headers["retry-after"])
        case 500...599: return .retry(.http(status: response.status, code: nil))
        default: return .done(.badRequest(nil))
        }
        guard let decoded = try? JSONDecoder().decode(VerifyReceiptResponse.self, from: response.body) else {
            return .done(.malformedResponse("verifyReceipt response is not the expected JSON"))
        }
        let code = AppStoreErrorCode(Int64(decoded.status))
        switch decoded.status {
        case 0, 21_006, 21_007, 21_008:
            return .done(.success(response))
        case 21_002, 21_005, 21_009:
            return .retry(.http(status: response.status, code: code))
        case 21_100...21_199 where decoded.isRetryable == true:
            return .retry(.http(status: response.status, code: code))
        default:
            return .done(.badRequest(code))
        }
    }
}
