/// One page of Get Transaction History (v2).
///
/// [HistoryResponse](https://developer.apple.com/documentation/appstoreserverapi/historyresponse)
public struct HistoryResponse: Codable, Hashable, Sendable {
    /// Token for the next page; send it back with the same filters.
    public var revision: String?
    public var hasMore: Bool?
    public var bundleId: String?
    public var appAppleId: Int64?
    /// Raw `environment`. See ``environment``.
    public var rawEnvironment: String?
    /// Compact JWS strings of ``JWSTransactionDecodedPayload``s (up to 20 per page).
    public var signedTransactions: [String]?

    public init(
        revision: String? = nil, hasMore: Bool? = nil, bundleId: String? = nil,
        appAppleId: Int64? = nil, rawEnvironment: String? = nil, signedTransactions: [String]? = nil
    ) {
        self.revision = revision
        self.hasMore = hasMore
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.rawEnvironment = rawEnvironment
        self.signedTransactions = signedTransactions
    }

    public enum CodingKeys: String, CodingKey {
        case revision, hasMore, bundleId, appAppleId
        case rawEnvironment = "environment"
        case signedTransactions
    }

    public var environment: AppStoreEnvironment? {
        get { rawEnvironment.flatMap(AppStoreEnvironment.init(rawValue:)) }
        set { rawEnvironment = newValue?.rawValue }
    }
}
