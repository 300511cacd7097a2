@testable import AppStoreServerAPI
import AppStoreModels
import Crypto
import Foundation
import Testing

private let key = P256.Signing.PrivateKey()
private let signer = PromotionalOfferSigner(issuerId: "57246542-96fe-1a63-e053-0824d011072a", keyId: "IAPKEY1234",
                                            bundleId: "com.example.app", privateKey: key)
private let t0 = Date(timeIntervalSince1970: 1_795_255_200.123)

@Suite("Promotional offer signatures")
struct PromotionalOfferSignerTests {
    @Test func originalFormSignsTheSevenFieldsJoinedByU2063() throws {
        let nonce = UUID(uuidString: "F1C2D3E4-0000-4000-8000-00000000ABCD")!
        let offer = try signer.sign(productId: "pro.monthly", offerId: "save50", appAccountToken: "A1B2C3D4-0000-4000-8000-000000000001",
                                    transactionId: "1000", now: t0, nonce: nonce)
        #expect(offer.nonce == "f1c2d3e4-0000-4000-8000-00000000abcd")
        #expect(offer.timestamp == 1_795_255_200_123)
        let message = "com.example.app\u{2063}IAPKEY1234\u{2063}pro.monthly\u{2063}save50\u{2063}a1b2c3d4-0000-4000-8000-000000000001\u{2063}"
            + "f1c2d3e4-0000-4000-8000-00000000abcd\u{2063}1795255200123"
        #expect(signer.message(productId: "pro.monthly", offerId: "save50", appAccountToken: "A1B2C3D4-0000-4000-8000-000000000001",
                               nonce: offer.nonce, timestamp: offer.timestamp) == message)
        let der = try #require(Data(base64Encoded: offer.signature))
        let signature = try P256.Signing.ECDSASignature(derRepresentation: der)
        #expect(key.publicKey.isValidSignature(signature, for: Data(message.utf8)))
        #expect(!key.publicKey.isValidSignature(signature, for: Data(message.replacingOccurrences(of: "save50", with: "save60").utf8)))
    }

    @Test func withoutATokenTheFieldIsEmpty() {
        let m = signer.message(productId: "p", offerId: "o", appAccountToken: nil, nonce: "n", timestamp: 5)
        #expect(m == ["com.example.app", "IAPKEY1234", "p", "o", "", "n", "5"].joined(separator: "\u{2063}"))
    }

    @Test func jwsFormCarriesApplesClaimsAndVerifies() throws {
        let offer = try signer.sign(productId: "pro.monthly", offerId: "save50", appAccountToken: nil, transactionId: "1000", now: t0)
        let jws = try CompactJWS(offer.jws)
        let header = try jws.decodeHeader()
        #expect(header.alg == "ES256" && header.kid == "IAPKEY1234" && header.typ == "JWT" && header.x5c == nil)
        let claims = try jws.decodePayload(PromotionalOfferSigner.OfferClaims.self)
        #expect(claims == .init(iss: "57246542-96fe-1a63-e053-0824d011072a", bid: "com.example.app", aud: "promotional-offer",
                                iat: 1_795_255_200, nonce: offer.nonce, productId: "pro.monthly", offerIdentifier: "save50",
                                transactionId: "1000"))
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: jws.signature)
        #expect(key.publicKey.isValidSignature(signature, for: Data(jws.signingInput)))
    }

    @Test func everySignatureHasAFreshNonceAndALaterOneAFreshTimestamp() throws {
        let first = try signer.sign(productId: "p", offerId: "o", appAccountToken: nil, transactionId: nil, now: t0)
        let again = try signer.sign(productId: "p", offerId: "o", appAccountToken: nil, transactionId: nil, now: t0)
        let dayLater = try signer.sign(productId: "p", offerId: "o", appAccountToken: nil, transactionId: nil,
                                       now: t0 + PromotionalOfferSigner.validity + 3600)
        #expect(Set([first.nonce, again.nonce, dayLater.nonce]).count == 3)
        #expect(first.signature != again.signature)
        #expect(dayLater.timestamp - first.timestamp == Int64((PromotionalOfferSigner.validity + 3600) * 1000))
    }

    @Test func theKeyNeverPrints() {
        #expect(String(describing: signer) == "PromotionalOfferSigner(bundleId: com.example.app, keyId: IAPKEY1234, key: <redacted>)")
        #expect(!String(reflecting: signer).contains(key.rawRepresentation.base64EncodedString()))
    }
}

/// Apple's Python library (app-store-server-library) against churnwatch's offers: the same
/// signed message (Apple's library's bytes verify churnwatch's signature, and churnwatch's
/// message verifies Apple's), and the same JWS header and claims (both verified by PyJWT with
/// the public key). Runs `ops/crosscheck-python --offers`; skipped with a printed reason only
/// when python3 is missing.
@Suite("Promotional offers cross-checked with Apple's Python library")
struct PromotionalOfferCrossCheckTests {
    struct Case: Encodable {
        var name: String, product_id: String, offer_id: String, app_account_token: String?, nonce: String, timestamp: Int64
        var transaction_id: String?, signature: String, jws: String
    }

    struct Result: Decodable {
        var name: String
        var error: String?
        var apple_message: String?
        var apple_signature: String?
        var churnwatch_signature_verifies: Bool?
        var apple_jws: String?
        var apple_jws_header: [String: String]?
        var churnwatch_jws_header: [String: String]?
        var apple_jws_claims: JSONValue?
        var churnwatch_jws_claims: JSONValue?
    }

    @Test func appleAgreesWithChurnwatch() throws {
        guard PythonCrossCheckTests.pythonAvailable() else {
            print("PromotionalOfferCrossCheckTests: skipped: python3 is not installed")
            return
        }
        let inputs: [(String, String, String, String?, String?)] = [
            ("with a token", "pro.monthly", "save50", "A1B2C3D4-0000-4000-8000-000000000001", "1000"),
            ("without a token or transaction", "pro.yearly", "winback.free.month", nil, nil),
            ("non-ASCII ids", "prö.monthly", "offre-été", "0f0e0d0c-0000-4000-8000-0000000000ff", "2000000123"),
        ]
        var cases: [Case] = []
        var messages: [String: String] = [:]
        for (name, product, offerId, token, tx) in inputs {
            let o = try signer.sign(productId: product, offerId: offerId, appAccountToken: token, transactionId: tx, now: Date())
            messages[name] = signer.message(productId: product, offerId: offerId, appAccountToken: token, nonce: o.nonce, timestamp: o.timestamp)
            cases.append(Case(name: name, product_id: product, offer_id: offerId, app_account_token: token, nonce: o.nonce,
                              timestamp: o.timestamp, transaction_id: tx, signature: o.signature, jws: o.jws))
        }
        struct Spec: Encodable { var key_pem: String, key_id: String, issuer_id: String, bundle_id: String, cases: [Case] }
        let spec = Spec(key_pem: key.pemRepresentation, key_id: "IAPKEY1234", issuer_id: "57246542-96fe-1a63-e053-0824d011072a",
                        bundle_id: "com.example.app", cases: cases)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cw-offers-\(UUID().uuidString).json")
        try JSONEncoder().encode(spec).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [PythonCrossCheckTests.repositoryRoot.appendingPathComponent("ops/crosscheck-python").path, "--offers", file.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "ops/crosscheck-python --offers failed")
        let results = try JSONDecoder().decode([Result].self, from: data)
        try #require(results.count == cases.count)

        for (c, r) in zip(cases, results) {
            try #require(r.error == nil, "\(c.name): \(r.error ?? "")")
            let appleMessage = try #require(r.apple_message.flatMap { Data(base64Encoded: $0) })
            #expect(appleMessage == Data(messages[c.name]!.utf8), "\(c.name): Apple's library signs another message")
            #expect(r.churnwatch_signature_verifies == true, "\(c.name)")
            let appleSignature = try P256.Signing.ECDSASignature(derRepresentation: Data(base64Encoded: r.apple_signature ?? "") ?? Data())
            #expect(key.publicKey.isValidSignature(appleSignature, for: Data(messages[c.name]!.utf8)), "\(c.name)")

            #expect(r.apple_jws_header == r.churnwatch_jws_header, "\(c.name)")
            guard case .object(var apple)? = r.apple_jws_claims, case .object(var ours)? = r.churnwatch_jws_claims else {
                Issue.record("\(c.name): claims are not objects"); continue
            }
            // iat and nonce are fresh in each; the rest must be identical.
            #expect(Set(apple.keys) == Set(ours.keys), "\(c.name): \(apple.keys.sorted()) vs \(ours.keys.sorted())")
            #expect(ours["nonce"] == .string(c.nonce))
            if case .integer(let a)? = apple["iat"], case .integer(let o)? = ours["iat"] { #expect(abs(a - o) < 120) } else {
                Issue.record("\(c.name): iat missing")
            }
            for k in ["iat", "nonce"] { apple[k] = nil; ours[k] = nil }
            #expect(apple == ours, "\(c.name)")
        }
    }
}
