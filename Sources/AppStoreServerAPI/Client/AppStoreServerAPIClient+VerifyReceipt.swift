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
            // The judge decodes the answer to read its status; the accepted one is kept, not decoded twice.
            var accepted: VerifyReceiptResponse?
            let raw = await perform(RateLimitKey(.verifyReceipt, environment), authorized: false) { _ in
                HTTPRequest(
                    method: "POST", url: url,
                    headers: [("Content-Type", "application/json"), ("Accept", "application/json"), ("User-Agent", "churnwatch/1.0")],
                    body: body, timeout: configuration.requestTimeout)
            } judge: { http in
                let (verdict, decoded) = Self.judgeVerifyReceipt(http)
                accepted = decoded
                return verdict
            }
            guard case .success = raw else { return raw.failure() }
            guard let response = accepted else { return .malformedResponse("verifyReceipt response is not the expected JSON") }
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
    /// The verdict, and the decoded answer when it is accepted (success).
    static func judgeVerifyReceipt(_ response: HTTPResponse) -> (Verdict, VerifyReceiptResponse?) {
        switch response.status {
        case 200..<300: break
        case 429: return (.rateLimited(response.headers["retry-after"]), nil)
        case 500...599: return (.retry(.http(status: response.status, code: nil)), nil)
        default: return (.done(.badRequest(nil)), nil)
        }
        let decoded: VerifyReceiptResponse
        do {
            decoded = try JSONDecoder().decode(VerifyReceiptResponse.self, from: response.body)
        } catch {
            return (.done(.malformedResponse("verifyReceipt response is not the expected JSON (\(describe(error)))")), nil)
        }
        let code = AppStoreErrorCode(Int64(decoded.status))
        switch decoded.status {
        case 0, 21_006, 21_007, 21_008:
            return (.done(.success(response)), decoded)
        case 21_002, 21_005, 21_009:
            return (.retry(.http(status: response.status, code: code)), nil)
        case 21_100...21_199 where decoded.isRetryable == true:
            return (.retry(.http(status: response.status, code: code)), nil)
        default:
            return (.done(.badRequest(code)), nil)
        }
    }
}
