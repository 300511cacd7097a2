import AppStoreModels

/// The endpoints churnwatch calls; each has its own rate limit at Apple, per app and environment.
public enum AppStoreEndpoint: String, Hashable, Sendable, CaseIterable, Codable {
    /// `GET /inApps/v1/subscriptions/{transactionId}`
    case subscriptionStatuses = "status"
    /// `GET /inApps/v2/history/{transactionId}`
    case transactionHistory = "history"
    /// `GET /inApps/v1/transactions/{transactionId}`
    case transactionInfo = "transaction"
    /// `GET /inApps/v2/refund/lookup/{transactionId}`
    case refundHistory = "refund"
    /// Legacy `POST /verifyReceipt`.
    case verifyReceipt = "receipt"
    /// `POST /inApps/v1/notifications/history`
    case notificationHistory = "notifications"
    /// `PUT /inApps/v2/transactions/consumption/{transactionId}` (Send Consumption Information)
    case consumption = "consumption"
    /// `/inApps/v1/messaging/...` (the Retention Messaging API's management calls)
    case messaging = "messaging"
}

/// What a rate limiter budgets: one endpoint in one environment.
public struct RateLimitKey: Hashable, Sendable, CustomStringConvertible {
    public var endpoint: AppStoreEndpoint
    public var environment: AppStoreEnvironment

    public init(_ endpoint: AppStoreEndpoint, _ environment: AppStoreEnvironment) {
        self.endpoint = endpoint
        self.environment = environment
    }

    public var description: String { "\(endpoint.rawValue)/\(environment.rawValue)" }
}

/// Requests per second allowed per endpoint and environment.
///
/// Apple's published limits (per app, per endpoint, enforced hourly): 50/s for statuses, history,
/// transaction info, notification history and consumption information, 10/s for refund history; sandbox gets 10 %. No limit is published for
/// verifyReceipt; churnwatch uses the status figure. Nor for the Retention Messaging management calls, which an operator makes
/// by hand: 10/s (1/s in Sandbox).
public struct AppStoreRateLimits: Hashable, Sendable {
    public var production: [AppStoreEndpoint: Double]
    public var sandbox: [AppStoreEndpoint: Double]

    public init(production: [AppStoreEndpoint: Double], sandbox: [AppStoreEndpoint: Double]) {
        self.production = production
        self.sandbox = sandbox
    }

    /// Apple's published limits.
    public static let apple = AppStoreRateLimits(
        production: [.subscriptionStatuses: 50, .transactionHistory: 50, .transactionInfo: 50, .refundHistory: 10, .verifyReceipt: 50,
                     .notificationHistory: 50, .consumption: 50, .messaging: 10],
        sandbox: [.subscriptionStatuses: 5, .transactionHistory: 5, .transactionInfo: 5, .refundHistory: 1, .verifyReceipt: 5,
                  .notificationHistory: 5, .consumption: 5, .messaging: 1])

    /// Requests per second for `key` (1/s when unset).
    public func perSecond(_ key: RateLimitKey) -> Double {
        let table = key.environment == .sandbox ? sandbox : production
        return table[key.endpoint] ?? 1
    }
}
