@testable import AppStoreServerAPI
import Crypto
import Foundation
import Testing

@Suite("ES256 request token")
struct AppStoreTokenProviderTests {
    let key = P256.Signing.PrivateKey()
    let clock = TestClock()

    func provider() -> AppStoreTokenProvider {
        AppStoreTokenProvider(issuerId: TestConfiguration.issuerId, keyId: TestConfiguration.keyId, bundleId: Payloads.bundleId, privateKey: key, clock: clock)
    }

    @Test func tokenDecodesAndVerifiesWithThePublicKey() throws {
        let token = try provider().token()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        let header = try JSONDecoder().decode(JWSHeader.self, from: Data(try #require(Base64URL.decode(parts[0]))))
        #expect(header == JWSHeader(alg: "ES256", kid: TestConfiguration.keyId, typ: "JWT"))
        let claims = try JSONDecoder().decode(AppStoreAPIClaims.self, from: Data(try #require(Base64URL.decode(parts[1]))))
        #expect(claims.iss == TestConfiguration.issuerId)
        #expect(claims.aud == "appstoreconnect-v1")
        #expect(claims.bid == Payloads.bundleId)
        #expect(claims.iat == Int64(clock.now().timeIntervalSince1970))
        #expect(claims.exp > claims.iat && claims.exp - claims.iat <= 3600)
        let raw = try #require(Base64URL.decode(parts[2]))
        #expect(raw.count == 64) // R||S, not DER
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: raw)
        #expect(key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }

    @Test func oneTokenIsReusedUntilAMinuteBeforeExpiry() throws {
        let p = provider()
        let first = try p.token()
        let claims = try JSONDecoder().decode(AppStoreAPIClaims.self, from: Data(Base64URL.decode(first.split(separator: ".")[1])!))
        let lifetime = TimeInterval(claims.exp - claims.iat)
        clock.advance(by: lifetime - 61)
        #expect(try p.token() == first)
        #expect(p.mintedCount == 1)
        clock.advance(by: 2)
        let second = try p.token()
        #expect(second != first)
        #expect(p.mintedCount == 2)
    }

    @Test func invalidateMintsAFreshTokenOnlyForTheRejectedOne() throws {
        let p = provider()
        let first = try p.token()
        p.invalidate("some other token")
        #expect(try p.token() == first)
        p.invalidate(first)
        clock.advance(by: 1)
        #expect(try p.token() != first)
        #expect(p.mintedCount == 2)
    }

    @Test func lifetimeIsClampedToSixtyMinutes() throws {
        let p = AppStoreTokenProvider(issuerId: "i", keyId: "k", bundleId: "b", privateKey: key, clock: clock, lifetime: 7200)
        let claims = try JSONDecoder().decode(AppStoreAPIClaims.self, from: Data(Base64URL.decode(try p.token().split(separator: ".")[1])!))
        #expect(claims.exp - claims.iat == 3600)
    }
}
