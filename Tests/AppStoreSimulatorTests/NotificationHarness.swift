import AppStoreModels
import Foundation
@testable import AppStoreSimulator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `NotificationHistoryResponse` as a client decodes it.
struct HistoryPage: Decodable {
    struct Attempt: Decodable, Hashable {
        var attemptDate: Int64
        var sendAttemptResult: String
    }

    struct Item: Decodable {
        var signedPayload: String
        var sendAttempts: [Attempt]
    }

    var notificationHistory: [Item]
    var hasMore: Bool
    var paginationToken: String?
}

/// `responseBodyV2DecodedPayload` with `data`.
struct DecodedNotification: Decodable {
    struct Data: Decodable {
        var appAppleId: Int64?
        var bundleId: String
        var environment: String
        var signedTransactionInfo: String
        var signedRenewalInfo: String
        var status: Int32
    }

    var notificationType: String
    var subtype: String?
    var notificationUUID: String
    var version: String
    var signedDate: Int64
    var data: Data
}

extension SimHarness {
    var now: Int64 { service.clock.now() }

    /// `POST /inApps/v1/notifications/history` with a JSON body (or raw bytes) and an optional token.
    func notificationHistory(
        _ body: [String: Any], token: String? = nil, sandbox: Bool = false, auth: String? = nil, raw: Data? = nil
    ) async throws -> Response {
        var path = "/inApps/v1/notifications/history"
        if let token { path += "?paginationToken=" + token.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(sandbox ? sandboxPort : port)\(path)")!)
        req.httpMethod = "POST"
        req.httpBody = try raw ?? JSONSerialization.data(withJSONObject: body)
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let t = try auth ?? self.token()
        if !t.isEmpty { req.setValue("Bearer \(t)", forHTTPHeaderField: "Authorization") }
        return try await SimHarness.send(req, timeout: 20)
    }

    /// Every page of a history query, following `paginationToken` while `hasMore`.
    func allNotifications(_ body: [String: Any], sandbox: Bool = false, auth: String? = nil) async throws
        -> (items: [HistoryPage.Item], pages: Int)
    {
        var items: [HistoryPage.Item] = []
        var token: String?
        var pages = 0
        repeat {
            let r = try await notificationHistory(body, token: token, sandbox: sandbox, auth: auth)
            guard r.status == 200 else { throw HarnessError.status(r.status, r.text) }
            let page = try r.decode(HistoryPage.self)
            pages += 1
            items += page.notificationHistory
            guard page.hasMore else { break }
            token = page.paginationToken
        } while pages < 10_000
        return (items, pages)
    }

    /// `/_sim/events` in a window.
    func truthEvents(from: Int64, to: Int64) async throws -> [[String: Any]] {
        let r = try await get("/_sim/events?from=\(SimTime.format(from))&to=\(SimTime.format(to))", token: "")
        return ((r.json as? [String: Any])?["events"] as? [[String: Any]]) ?? []
    }

    /// `/_sim/notifications` in a window.
    func notificationTruth(from: Int64, to: Int64) async throws -> [[String: Any]] {
        let r = try await get("/_sim/notifications?from=\(SimTime.format(from))&to=\(SimTime.format(to))", token: "")
        return ((r.json as? [String: Any])?["notifications"] as? [[String: Any]]) ?? []
    }
}

enum HarnessError: Error {
    case status(Int, String)
}

/// The notification a true event must have been reported by (type, subtype), from
/// docs/apple-api.md, "Notifications V2".
func expectedNotification(_ event: [String: Any]) -> (String, String?)? {
    let details = event["details"] as? [String: Any] ?? [:]
    switch event["event"] as? String {
    case "renewed": return ("DID_RENEW", nil)
    case "billing_recovered": return ("DID_RENEW", "BILLING_RECOVERY")
    case "resubscribed": return ("SUBSCRIBED", "RESUBSCRIBE")
    case "auto_renew_disabled": return ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED")
    case "auto_renew_enabled": return ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED")
    case "grace_period_started": return ("DID_FAIL_TO_RENEW", "GRACE_PERIOD")
    case "billing_retry_started": return ("DID_FAIL_TO_RENEW", nil)
    case "grace_period_expired": return ("GRACE_PERIOD_EXPIRED", nil)
    case "expired":
        let subtypes = [1: "VOLUNTARY", 2: "BILLING_RETRY", 3: "PRICE_INCREASE", 4: "PRODUCT_NOT_FOR_SALE"]
        return ("EXPIRED", subtypes[details["expiration_intent"] as? Int ?? 5])
    case "refunded": return (details["revocation_type"] as? String == "FAMILY_REVOKE" ? "REVOKE" : "REFUND", nil)
    case "refund_reversed": return ("REFUND_REVERSED", nil)
    case "plan_change_scheduled": return ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE")
    case "plan_change_cancelled": return ("DID_CHANGE_RENEWAL_PREF", nil)
    case "price_increase_pending": return ("PRICE_INCREASE", "PENDING")
    case "price_increase_accepted": return ("PRICE_INCREASE", "ACCEPTED")
    case "refund_requested": return ("CONSUMPTION_REQUEST", nil)
    case "refund_declined": return ("REFUND_DECLINED", nil)
    default: return nil  // plan_changed: with a renewal (DID_RENEW) or an upgrade (UPGRADE)
    }
}
