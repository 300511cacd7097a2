import AppStoreModels
import Crypto
import Foundation
import Synchronization

/// Mints the ES256 bearer token for App Store Server API requests and reuses it until a minute
/// before it expires.
///
/// Header `alg`/`kid`/`typ`; claims `iss`, `iat`, `exp` (at most 60 minutes after `iat`),
/// `aud` = `appstoreconnect-v1`, `bid`. The signature is the raw 64-byte `R||S`.
public final class AppStoreTokenProvider: Sendable {
    /// Apple refuses tokens that live longer than this.
    public static let maximumLifetime: TimeInterval = 60 * 60
    /// A token is replaced once it has less than this left.
    public static let renewalMargin: TimeInterval = 60

    private let issuerId: String
    private let keyId: String
    private let bundleId: String
    private let key: P256.Signing.PrivateKey
    private let clock: any AppStoreClock
    private let lifetime: TimeInterval
    private let current = Mutex<(token: String, expires: Date)?>(nil)
    private let minted = Mutex<Int>(0)

    /// - Parameter lifetime: seconds from `iat` to `exp`; clamped to 2–60 minutes.
    public init(
        issuerId: String, keyId: String, bundleId: String, privateKey: P256.Signing.PrivateKey,
        clock: any AppStoreClock = SystemClock(), lifetime: TimeInterval = 30 * 60
    ) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.bundleId = bundleId
        self.key = privateKey
        self.clock = clock
        self.lifetime = min(max(lifetime, 2 * Self.renewalMargin), Self.maximumLifetime)
    }

    /// How many tokens were minted so far.
    public var mintedCount: Int { minted.withLock { $0 } }

    /// The current token, minting one when there is none or it expires within a minute.
    public func token() throws -> String {
        let now = clock.now()
        return try current.withLock { state in
            if let state, state.expires.timeIntervalSince(now) > Self.renewalMargin { return state.token }
            let fresh = try mint(at: now)
            state = fresh
            return fresh.token
        }
    }

    /// Forgets `token` (Apple answered 401 to it), so the next ``token()`` mints a new one.
    /// A token already replaced by another task is left alone.
    public func invalidate(_ token: String) {
        current.withLock { state in
            if state?.token == token { state = nil }
        }
    }

    private func mint(at now: Date) throws -> (token: String, expires: Date) {
        let iat = Int64(now.timeIntervalSince1970.rounded(.down))
        let exp = iat + Int64(lifetime)
        let header = JWSHeader(alg: "ES256", kid: keyId, typ: "JWT")
        let claims = AppStoreAPIClaims(iss: issuerId, iat: iat, exp: exp, bid: bundleId)
        let input = try CompactJWS.signingInput(header: header, payload: claims)
        let signature = try key.signature(for: Data(input.utf8))
        minted.withLock { $0 += 1 }
        return (CompactJWS.serialize(signingInput: input, signature: signature.rawRepresentation),
                Date(timeIntervalSince1970: TimeInterval(exp)))
    }
}
