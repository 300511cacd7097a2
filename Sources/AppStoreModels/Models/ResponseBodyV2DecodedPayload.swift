/// The payload of an App Store Server Notification V2 (`signedPayload`), decoded.
///
/// [ResponseBodyV2DecodedPayload](https://developer.apple.com/documentation/appstoreservernotifications/responsebodyv2decodedpayload)
/// Types and subtypes stay strings: Apple adds new ones, and a notification of a type churnwatch
/// does not know is recorded, not rejected.
public struct ResponseBodyV2DecodedPayload: Codable, Hashable, Sendable {
    public var notificationType: String?
    public var subtype: String?
    /// Unique per notification; Apple resends the same one on retries. Deduplicate on it.
    public var notificationUUID: String?
    /// `data`, for notifications about a subscription or a transaction. Absent on the summary of
    /// a renewal-date extension and on external-purchase notifications.
    public var data: NotificationData?
    /// `summary`, instead of `data`, for the summary of a renewal-date extension.
    public var summary: NotificationAppIdentity?
    /// `externalPurchaseToken`, instead of `data`, for external-purchase notifications.
    public var externalPurchaseToken: NotificationAppIdentity?
    public var version: String?
    public var signedDate: EpochMilliseconds?

    public init(
        notificationType: String? = nil, subtype: String? = nil, notificationUUID: String? = nil,
        data: NotificationData? = nil, summary: NotificationAppIdentity? = nil,
        externalPurchaseToken: NotificationAppIdentity? = nil, version: String? = nil, signedDate: EpochMilliseconds? = nil
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.data = data
        self.summary = summary
        self.externalPurchaseToken = externalPurchaseToken
        self.version = version
        self.signedDate = signedDate
    }
}

/// `data` of a V2 notification: the app, the environment and the subscription as of the
/// notification's `signedDate`.
///
/// [Data](https://developer.apple.com/documentation/appstoreservernotifications/data)
public struct NotificationData: Codable, Hashable, Sendable {
    public var appAppleId: Int64?
    public var bundleId: String?
    public var bundleVersion: String?
    /// Raw `environment`. See ``environment``.
    public var rawEnvironment: String?
    /// Compact JWS of a ``JWSTransactionDecodedPayload``.
    public var signedTransactionInfo: String?
    /// Compact JWS of a ``JWSRenewalInfoDecodedPayload``.
    public var signedRenewalInfo: String?
    /// Raw `status` (1 active … 5 revoked), as in Get All Subscription Statuses.
    public var rawStatus: Int32?
    /// Raw `consumptionRequestReason`, on a `CONSUMPTION_REQUEST`. See ``ConsumptionRequestReason``.
    public var rawConsumptionRequestReason: String?

    public init(
        appAppleId: Int64? = nil, bundleId: String? = nil, bundleVersion: String? = nil, rawEnvironment: String? = nil,
        signedTransactionInfo: String? = nil, signedRenewalInfo: String? = nil, rawStatus: Int32? = nil,
        rawConsumptionRequestReason: String? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.bundleVersion = bundleVersion
        self.rawEnvironment = rawEnvironment
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
        self.rawStatus = rawStatus
        self.rawConsumptionRequestReason = rawConsumptionRequestReason
    }

    public enum CodingKeys: String, CodingKey {
        case appAppleId, bundleId, bundleVersion
        case rawEnvironment = "environment"
        case signedTransactionInfo, signedRenewalInfo
        case rawStatus = "status"
        case rawConsumptionRequestReason = "consumptionRequestReason"
    }

    public var environment: AppStoreEnvironment? {
        get { rawEnvironment.flatMap(AppStoreEnvironment.init(rawValue:)) }
        set { rawEnvironment = newValue?.rawValue }
    }

    public var status: SubscriptionStatus? { rawStatus.flatMap(SubscriptionStatus.init(rawValue:)) }
}

/// The app a notification without `data` names: `summary` (with `environment`) or
/// `externalPurchaseToken` (whose `externalPurchaseId` starts with `SANDBOX` in Sandbox).
public struct NotificationAppIdentity: Codable, Hashable, Sendable {
    public var appAppleId: Int64?
    public var bundleId: String?
    public var rawEnvironment: String?
    public var externalPurchaseId: String?

    public init(appAppleId: Int64? = nil, bundleId: String? = nil, rawEnvironment: String? = nil, externalPurchaseId: String? = nil) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.rawEnvironment = rawEnvironment
        self.externalPurchaseId = externalPurchaseId
    }

    public enum CodingKeys: String, CodingKey {
        case appAppleId, bundleId
        case rawEnvironment = "environment"
        case externalPurchaseId
    }
}
