/// The body of Get Notification History. The same body goes with every page.
///
/// [NotificationHistoryRequest](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryrequest)
public struct NotificationHistoryRequest: Codable, Hashable, Sendable {
    /// Required: the first moment, within the last 180 days (Sandbox: 30).
    public var startDate: EpochMilliseconds
    /// Required: the last moment; one in the future means now.
    public var endDate: EpochMilliseconds
    public var notificationType: String?
    public var notificationSubtype: String?
    /// One customer's notifications; not together with a type.
    public var transactionId: String?
    /// Only notifications that never reached the app's server.
    public var onlyFailures: Bool?

    public init(
        startDate: EpochMilliseconds, endDate: EpochMilliseconds, notificationType: String? = nil,
        notificationSubtype: String? = nil, transactionId: String? = nil, onlyFailures: Bool? = nil
    ) {
        self.startDate = startDate
        self.endDate = endDate
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
        self.transactionId = transactionId
        self.onlyFailures = onlyFailures
    }
}

/// One page of Get Notification History (up to 20 records).
///
/// [NotificationHistoryResponse](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponse)
public struct NotificationHistoryResponse: Codable, Hashable, Sendable {
    public var notificationHistory: [NotificationHistoryResponseItem]?
    public var hasMore: Bool?
    /// Sent back as `?paginationToken=` with the same body for the next page.
    public var paginationToken: String?

    public init(notificationHistory: [NotificationHistoryResponseItem]? = nil, hasMore: Bool? = nil, paginationToken: String? = nil) {
        self.notificationHistory = notificationHistory
        self.hasMore = hasMore
        self.paginationToken = paginationToken
    }
}

/// A notification Apple sent or tried to send, with its delivery attempts.
///
/// [NotificationHistoryResponseItem](https://developer.apple.com/documentation/appstoreserverapi/notificationhistoryresponseitem)
public struct NotificationHistoryResponseItem: Codable, Hashable, Sendable {
    /// The notification's compact JWS, as it was sent.
    public var signedPayload: String?
    public var sendAttempts: [SendAttemptItem]?

    public init(signedPayload: String? = nil, sendAttempts: [SendAttemptItem]? = nil) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}

/// One delivery attempt: when, and `SUCCESS` or why not (`TIMED_OUT`, `SSL_ISSUE`, ...).
public struct SendAttemptItem: Codable, Hashable, Sendable {
    public var attemptDate: EpochMilliseconds?
    public var sendAttemptResult: String?

    public init(attemptDate: EpochMilliseconds? = nil, sendAttemptResult: String? = nil) {
        self.attemptDate = attemptDate
        self.sendAttemptResult = sendAttemptResult
    }
}
