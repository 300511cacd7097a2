/// The claims of the ES256 bearer token that authorizes App Store Server API requests.
///
/// [Generating JSON Web Tokens for API requests](https://developer.apple.com/documentation/appstoreserverapi/generating-json-web-tokens-for-api-requests)
public struct AppStoreAPIClaims: Codable, Hashable, Sendable {
    /// The audience every App Store Server API token carries.
    public static let audience = "appstoreconnect-v1"

    /// Issuer ID (a UUID from App Store Connect).
    public var iss: String
    /// Issued at, UNIX seconds.
    public var iat: Int64
    /// Expiry, UNIX seconds; Apple rejects tokens whose `exp` is more than 60 minutes after `iat`.
    public var exp: Int64
    /// Always `appstoreconnect-v1`.
    public var aud: String
    /// The app's bundle ID.
    public var bid: String

    public init(iss: String, iat: Int64, exp: Int64, aud: String = AppStoreAPIClaims.audience, bid: String) {
        self.iss = iss
        self.iat = iat
        self.exp = exp
        self.aud = aud
        self.bid = bid
    }
}
