import AppStoreServerAPI
import Crypto
import Foundation

/// JWS verification on one core, as churnwatch's App Store client does it (formerly `cw-bench`).
///
///   churnwatch-bench jws [--seconds S]   jws_verify_per_s (warm chain cache) and
///                                        jws_verify_cold_per_s (a new verifier per payload:
///                                        certificate parsing and path validation every time)
///   churnwatch-bench jws-parts [--seconds S]   the cost of the pieces of a warm verification
struct JWSBenchmark {
    var seconds: Double

    static func transaction(_ i: Int) -> JWSTransactionDecodedPayload {
        var t = JWSTransactionDecodedPayload(
            transactionId: String(2_000_000_100_000_000 + i), originalTransactionId: String(2_000_000_000_000_000 + i / 12),
            webOrderLineItemId: String(2_000_000_050_000_000 + i), bundleId: "com.example.churnwatch",
            productId: "com.example.premium.monthly", subscriptionGroupIdentifier: "21501453",
            purchaseDate: 1_717_113_600_000, originalPurchaseDate: 1_709_251_200_000, expiresDate: 1_719_792_000_000,
            quantity: 1, appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138", signedDate: 1_717_200_000_000,
            offerIdentifier: nil, storefront: "USA", storefrontId: "143441", price: 9_990, currency: "USD",
            appTransactionId: "704289572311513224")
        t.type = .autoRenewableSubscription
        t.inAppOwnershipType = .purchased
        t.environment = .production
        t.transactionReason = .renewal
        return t
    }

    /// Calls `body` in rounds of 64 for about `seconds`; returns calls per second.
    static func measure(seconds: Double, _ body: () async throws -> Void) async rethrows -> Double {
        var count = 0
        let start = DispatchTime.now().uptimeNanoseconds
        var elapsed = 0.0
        while elapsed < seconds {
            for _ in 0..<64 { try await body() }
            count += 64
            elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
        return Double(count) / elapsed
    }

    /// jws_verify_per_s, jws_verify_cold_per_s, and the sizes of the payloads measured.
    func run() async throws {
        let pki = try BenchPKI()
        let payloads = try (0..<4096).map { try pki.sign(Self.transaction($0)) }
        let verifier = SignedDataVerifier(rootCertificates: [pki.root], bundleId: "com.example.churnwatch")
        for jws in payloads.prefix(256) { _ = try await verifier.verifyTransaction(jws, environment: .production) }

        var i = 0
        let warm = try await Self.measure(seconds: seconds) {
            _ = try await verifier.verifyTransaction(payloads[i & 4095], environment: .production)
            i += 1
        }
        let cold = try await Self.measure(seconds: seconds / 2) {
            let fresh = SignedDataVerifier(rootCertificates: [pki.root], bundleId: "com.example.churnwatch")
            _ = try await fresh.verifyTransaction(payloads[i & 4095], environment: .production)
            i += 1
        }
        print("jws_verify_per_s=\(Int(warm))")
        print("jws_verify_cold_per_s=\(Int(cold))")
        print("jws_header_bytes=\(pki.header.utf8.count)")
        print("jws_bytes=\(payloads[0].utf8.count)")
    }

    /// The pieces of a warm verification: JSON decoding, the ES256 check, base64url.
    func parts() async throws {
        let pki = try BenchPKI()
        let jws = try pki.sign(Self.transaction(1))
        let parts = jws.split(separator: ".").map(String.init)
        guard let payloadBytes = Base64URL.decode(parts[1]), let signatureBytes = Base64URL.decode(parts[2]),
              let lastDot = jws.utf8.lastIndex(of: UInt8(ascii: "."))
        else { throw BenchError("the benchmark's own JWS did not split") }
        let payload = Data(payloadBytes)
        let sig = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        let input = Array(jws.utf8[..<lastDot])
        let key = pki.leafKey.publicKey
        print("jws_part_json_decode_per_s=\(Int(try await Self.measure(seconds: seconds) { _ = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: payload) }))")
        print("jws_part_es256_verify_per_s=\(Int(await Self.measure(seconds: seconds) { _ = key.isValidSignature(sig, for: input) }))")
        print("jws_part_base64url_payload_per_s=\(Int(await Self.measure(seconds: seconds) { _ = Base64URL.decode(parts[1]) }))")
    }
}
