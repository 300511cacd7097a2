/// The body Apple sends with a 4xx/5xx: `{"errorCode": 4040010, "errorMessage": "..."}`.
///
/// [ErrorPayload](https://developer.apple.com/documentation/appstoreserverapi/errorpayload)
public struct ErrorPayload: Codable, Hashable, Sendable {
    /// Apple's error code; the first three digits equal the HTTP status.
    public var errorCode: Int64?
    public var errorMessage: String?

    public init(errorCode: Int64? = nil, errorMessage: String? = nil) {
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }
}
