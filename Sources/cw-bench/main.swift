// cw-bench: micro-benchmarks of the App Store client, printed as key=value lines.
//
//   cw-bench jws [--seconds S]   JWS verification on one core:
//                                jws_verify_per_s (warm chain cache) and jws_verify_cold_per_s
//                                (a new verifier per payload: certificate parsing and path
//                                validation every time)
//   cw-bench jws-parts           the cost of the pieces of a warm verification
// Build with -c release for meaningful figures.
import AppStoreServerAPI
import Crypto
import Foundation

func transaction(_ i: Int) -> JWSTransactionDecodedPayload {
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

func measure(seconds: Double, _ body: () async throws -> Void) async rethrows -> Double {
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

func benchJWS(seconds: Double) async throws {
    let pki = try BenchPKI()
    let payloads = try (0..<4096).map { try pki.sign(transaction($0)) }
    let verifier = SignedDataVerifier(rootCertificates: [pki.root], bundleId: "com.example.churnwatch")
    for jws in payloads.prefix(256) { _ = try await verifier.verifyTransaction(jws, environment: .production) }

    var i = 0
    let warm = try await measure(seconds: seconds) {
        _ = try await verifier.verifyTransaction(payloads[i & 4095], environment: .production)
        i += 1
    }
    let cold = try await measure(seconds: seconds / 2) {
        let fresh = SignedDataVerifier(rootCertificates: [pki.root], bundleId: "com.example.churnwatch")
        _ = try await fresh.verifyTransaction(payloads[i & 4095], environment: .production)
        i += 1
    }
    print("jws_verify_per_s=\(Int(warm))")
    print("jws_verify_cold_per_s=\(Int(cold))")
    print("jws_header_bytes=\(pki.header.utf8.count)")
    print("jws_bytes=\(payloads[0].utf8.count)")
}

var arguments = Array(CommandLine.arguments.dropFirst())
let mode = arguments.first ?? "jws"
var seconds = 3.0
if let i = arguments.firstIndex(of: "--seconds"), i + 1 < arguments.count, let s = Double(arguments[i + 1]) { seconds = s }

switch mode {
case "jws-parts":
    let pki = try BenchPKI()
    let jws = try pki.sign(transaction(1))
    let parts = jws.split(separator: ".").map(String.init)
    let payload = Data(Base64URL.decode(parts[1])!)
    let sig = try P256.Signing.ECDSASignature(rawRepresentation: Base64URL.decode(parts[2])!)
    let input = Array(jws.utf8[..<jws.utf8.lastIndex(of: UInt8(ascii: "."))!])
    let key = pki.leafKey.publicKey
    print("jws_part_json_decode_per_s=\(Int(try await measure(seconds: seconds) { _ = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: payload) }))")
    print("jws_part_es256_verify_per_s=\(Int(await measure(seconds: seconds) { _ = key.isValidSignature(sig, for: input) }))")
    print("jws_part_base64url_payload_per_s=\(Int(await measure(seconds: seconds) { _ = Base64URL.decode(parts[1]) }))")
case "jws":
    try await benchJWS(seconds: seconds)
default:
    FileHandle.standardError.write(Data("usage: cw-bench jws|jws-parts [--seconds S]\n".utf8))
    exit(64)
}
