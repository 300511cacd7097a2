import AppStoreModels
import Crypto
import Foundation

/// Checks App Store Server API bearer tokens as Apple does: ES256 over `header.claims` with the
/// API key, header `alg` ES256 / `kid` / `typ` JWT, claims `iss`, `aud` = appstoreconnect-v1,
/// `bid`, and `iat`/`exp` with a lifetime of at most 60 minutes.
public struct APITokenVerifier: Sendable {
    public let issuerId: String
    public let keyId: String
    public let bundleId: String
    public let publicKey: P256.Signing.PublicKey

    /// Why a token was refused (logged in stats; the client only sees 401).
    public enum Rejection: String, Error, Sendable, CaseIterable {
        case missing, malformed, algorithm, keyId, signature, issuer, audience, bundleId, expired
        case notYetValid, lifetimeTooLong
    }

    public init(issuerId: String, keyId: String, bundleId: String, publicKey: P256.Signing.PublicKey) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleId = bundleId
        self.publicKey = publicKey
    }

    /// Verifies an `Authorization` header value at `now` (UNIX seconds, wall clock); returns the
    /// token's `exp` on success.
    public func verify(authorization: String?, now: Int64) throws(Rejection) -> Int64 {
        guard let authorization, authorization.hasPrefix("Bearer ") else { throw .missing }
        let token = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard let jws = try? CompactJWS(token), let header = try? jws.decodeHeader(),
            let claims = try? jws.decodePayload(AppStoreAPIClaims.self)
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
        guard claims.bid == bundleId else { throw .bundleId }
        guard claims.exp - claims.iat <= 3600 else { throw .lifetimeTooLong }
        guard claims.exp > now else { throw .expired }
        guard claims.iat <= now + 60 else { throw .notYetValid }
        return claims.exp
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
