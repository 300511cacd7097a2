/// Response of Get All Subscription Statuses: one entry per subscription group.
///
/// [StatusResponse](https://developer.apple.com/documentation/appstoreserverapi/statusresponse)
public struct StatusResponse: Codable, Hashable, Sendable {
    /// Raw `environment`. See ``environment``.
    public var rawEnvironment: String?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var data: [SubscriptionGroupIdentifierItem]?

    public init(
        rawEnvironment: String? = nil, bundleId: String? = nil, appAppleId: Int64? = nil,
        data: [SubscriptionGroupIdentifierItem]? = nil
    ) {
        self.rawEnvironment = rawEnvironment
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.data = data
    }

    public enum CodingKeys: String, CodingKey {
        case rawEnvironment = "environment"
        case bundleId, appAppleId, data
    }

    public var environment: AppStoreEnvironment? {
        get { rawEnvironment.flatMap(AppStoreEnvironment.init(rawValue:)) }
        set { rawEnvironment = newValue?.rawValue }
    }
}
