/// The protected header of a compact JWS or JWT.
///
/// App Store payloads carry `alg` (`ES256`) and `x5c` (leaf, intermediate, root as standard
/// Base64 DER); API request tokens carry `alg`, `kid` and `typ` (`JWT`).
///
/// [JWSDecodedHeader](https://developer.apple.com/documentation/appstoreserverapi/jwsdecodedheader)
public struct JWSHeader: Codable, Hashable, Sendable {
    public var alg: String?
    public var kid: String?
    public var typ: String?
    /// Certificate chain, leaf first, each standard Base64 (not base64url) DER.
    public var x5c: [String]?

    public init(alg: String? = nil, kid: String? = nil, typ: String? = nil, x5c: [String]? = nil) {
        self.alg = alg
        self.kid = kid
        self.typ = typ
        self.x5c = x5c
    }
}
