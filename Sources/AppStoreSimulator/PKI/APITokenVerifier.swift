import AppStoreModels
import Crypto
import Foundation

/// Checks App Store Server API bearer tokens as Apple does: ES256 over `header.claims` with the
/// API key, header `alg` ES256 / `kid` / `typ` JWT, claims `iss`, `aud` = appstoreconnect-v1,
/// `bid` (one of the team's apps: one key signs for every app of the team), and `exp` at most 60
/// minutes after `iat`.
///
/// `iat` is optional, as it is at Apple: Apple's own Python library (app-store-server-library
/// 3.1.2) sends none, and Apple accepts its tokens. Without `iat` the token's remaining lifetime
/// (`exp - now`) must be at most 60 minutes. ``requireIssuedAt`` makes a missing `iat` a
/// rejection (`missingIssuedAt`): for tests of churnwatch's own tokens, which always carry one.
public struct APITokenVerifier: Sendable {
    public let issuerId: String
    public let keyId: String
    /// The apps the key may name in `bid` (the first is ``bundleId``).
    public let bundleIds: [String]
    public var bundleId: String { bundleIds[0] }
    public let publicKey: P256.Signing.PublicKey
    /// Reject tokens without `iat` (stricter than Apple).
    public let requireIssuedAt: Bool

    /// The claims as received: `iat` may be absent.
    struct ReceivedClaims: Decodable {
        var iss: String
        var iat: Int64?
        var exp: Int64
        var aud: String
        var bid: String
    }

    /// Why a token was refused (logged in stats; the client only sees 401).
    public enum Rejection: String, Error, Sendable, CaseIterable {
        case missing, malformed, algorithm, keyId, signature, issuer, audience, bundleId, expired
        case notYetValid, lifetimeTooLong, missingIssuedAt
    }

    public init(issuerId: String, keyId: String, bundleId: String, publicKey: P256.Signing.PublicKey,
                requireIssuedAt: Bool = false) {
        self.init(issuerId: issuerId, keyId: keyId, bundleIds: [bundleId], publicKey: publicKey, requireIssuedAt: requireIssuedAt)
    }

    /// A verifier for a team key that serves several apps (`bundleIds`, not empty).
    public init(issuerId: String, keyId: String, bundleIds: [String], publicKey: P256.Signing.PublicKey,
                requireIssuedAt: Bool = false) {
        precondition(!bundleIds.isEmpty)
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleIds = bundleIds
        self.publicKey = publicKey
        self.requireIssuedAt = requireIssuedAt
    }

    /// Verifies an `Authorization` header value at `now` (UNIX seconds, wall clock); returns the
    /// token's `exp` on success.
    public func verify(authorization: String?, now: Int64) throws(Rejection) -> Int64 {
        try verifyToken(authorization: authorization, now: now).expiresAt
    }

    /// Verifies an `Authorization` header value at `now` (UNIX seconds, wall clock); returns the
    /// token's `exp` and the app its `bid` names (an index into ``bundleIds``).
    public func verifyToken(authorization: String?, now: Int64) throws(Rejection) -> (expiresAt: Int64, app: Int) {
        guard let authorization, authorization.hasPrefix("Bearer ") else { throw .missing }
        let token = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard let jws = try? CompactJWS(token), let header = try? jws.decodeHeader(),
            let claims = try? jws.decodePayload(ReceivedClaims.self)
        else { throw .malformed }
        guard header.alg == "ES256" else { throw .algorithm }
        if let typ = header.typ, typ != "JWT" { throw .malformed }
        guard header.kid == keyId else { throw .keyId }
        guard jws.signature.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
            publicKey.isValidSignature(signature, for: jws.signingInput)
        else { throw .signature }
        guard claims.iss == issuerId else { throw .issuer }
        guard claims.aud == AppStoreAPIClaims.audience else { throw .audience }
        guard let app = bundleIds.firstIndex(of: claims.bid) else { throw .bundleId }
        guard let iat = claims.iat else {
            if requireIssuedAt { throw .missingIssuedAt }
            guard claims.exp > now else { throw .expired }
            guard claims.exp - now <= 3600 else { throw .lifetimeTooLong }
            return (claims.exp, app)
        }
        guard claims.exp - iat <= 3600 else { throw .lifetimeTooLong }
        guard claims.exp > now else { throw .expired }
        guard iat <= now + 60 else { throw .notYetValid }
        return (claims.exp, app)
    }

    /// Mints a token like churnwatch's client does (for `appstore-sim token`, benchmarks, tests).
    public static func makeToken(
        key: P256.Signing.PrivateKey, keyId: String, issuerId: String, bundleId: String,
        issuedAt: Int64, expiresAt: Int64, audience: String = AppStoreAPIClaims.audience
    ) throws -> String {
        let header = JWSHeader(alg: "ES256", kid: keyId, typ: "JWT")
        let claims = AppStoreAPIClaims(iss: issuerId, iat: issuedAt, exp: expiresAt, aud: audience, bid: bundleId)
        let input = try CompactJWS.signingInput(header: header, payload: claims)
        let signature = try key.signature(for: Array(input.utf8))
        return CompactJWS.serialize(signingInput: input, signature: signature.rawRepresentation)
    }
}
