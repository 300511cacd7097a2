import AppStoreModels
import Foundation

/// One page of Get Notification History as received. The records' `signedPayload`s are not
/// verified here: the caller verifies each on its own (``AppStoreServerAPIClient/verifyNotification(_:environment:)``),
/// so one bad record is quarantined while its neighbours are applied.
public struct NotificationHistoryPage: Sendable, Hashable {
    /// The environment that answered.
    public var environment: AppStoreEnvironment
    public var records: [NotificationHistoryResponseItem]
    public var hasMore: Bool
    /// For the next page (with the same request body); nil on the last page.
    public var paginationToken: String?
}

extension AppStoreServerAPIClient {
    /// Get Notification History: `POST /inApps/v1/notifications/history[?paginationToken=]`,
    /// one page. Paging is the caller's, so it can store the token after each page and resume
    /// from it after a crash (Apple: the same body goes with every page).
    public func notificationHistoryPage(
        _ request: NotificationHistoryRequest, paginationToken: String? = nil, environment: AppStoreEnvironment? = nil
    ) async -> AppStoreOutcome<NotificationHistoryPage> {
        let env = environment ?? configuration.environment
        // Sorted keys: every page of a sync sends byte-for-byte the same body (Foundation's key
        // order otherwise differs between encodings of one value).
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body: Data
        do { body = try encoder.encode(request) } catch {
            return .malformedResponse("cannot encode the notification history request")
        }
        let url = Self.url(configuration.baseURL(for: env), path: "/inApps/v1/notifications/history",
                           query: paginationToken.map { [(name: "paginationToken", value: $0)] } ?? [])
        let response = await perform(RateLimitKey(.notificationHistory, env), authorized: true) { token in
            var headers: [(name: String, value: String)] = [
                ("Content-Type", "application/json"), ("Accept", "application/json"), ("User-Agent", Self.userAgent),
            ]
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            return HTTPRequest(method: "POST", url: url, headers: headers, body: body, timeout: configuration.requestTimeout)
        } judge: { Self.judgeServerAPI($0) }
        guard case .success(let http) = response else { return response.failure() }
        let page: NotificationHistoryResponse
        do { page = try JSONDecoder().decode(NotificationHistoryResponse.self, from: http.body) } catch {
            return .malformedResponse("notification history response: \(Self.describe(error))")
        }
        let hasMore = page.hasMore ?? false
        let next = page.paginationToken.flatMap { $0.isEmpty ? nil : $0 }
        if hasMore, next == nil || next == paginationToken {
            return .malformedResponse("notification history response: hasMore without a new paginationToken")
        }
        return .success(NotificationHistoryPage(
            environment: env, records: page.notificationHistory ?? [], hasMore: hasMore, paginationToken: hasMore ? next : nil))
    }

    /// Verifies a notification's `signedPayload` for this app: chain, bundle id, app Apple id (in
    /// Production), environment (default: the configured one), and the signed transaction and
    /// renewal info inside it.
    public func verifyNotification(
        _ signedPayload: String, environment: AppStoreEnvironment? = nil, inner: Bool = true
    ) async throws(JWSVerificationFailure) -> VerifiedNotification {
        try await verifier.verifyNotification(
            signedPayload, environment: environment ?? configuration.environment, appAppleId: configuration.appAppleId, inner: inner)
    }

    /// The inner JWS of a notification verified with `inner: false`
    /// (``SignedDataVerifier/completeNotification(_:)``).
    public func completeNotification(_ outer: VerifiedNotification) async throws(JWSVerificationFailure) -> VerifiedNotification {
        try await verifier.completeNotification(outer)
    }
}
