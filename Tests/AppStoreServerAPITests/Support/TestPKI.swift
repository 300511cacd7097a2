import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
import X509

/// A throwaway App Store-shaped PKI made during the test: P-256 root, an intermediate with
/// Apple's WWDR OID, a leaf with Apple's receipt-signing OID. Payloads are signed with it during
/// the test; validation dates are pinned (``signedDate``).
struct TestPKI {
    static let receiptSigningOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    static let wwdrOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    /// 2024-06-01T00:00:00Z: the `signedDate` of test payloads.
    static let signedDate: EpochMilliseconds = 1_717_200_000_000

    struct Options {
        var leafHasAppleOID = true
        var intermediateHasAppleOID = true
        var leafValidity = (notBefore: date("2023-01-01"), notAfter: date("2026-01-01"))
        var intermediateValidity = (notBefore: date("2020-01-01"), notAfter: date("2035-01-01"))
        /// Key identifiers, critical basic constraints and key usage, as OpenSSL's X509_STRICT wants.
        var fullProfile = true
        var rootName = "churnwatch Test Root CA"
    }

    let rootKey: P256.Signing.PrivateKey
    let intermediateKey: P256.Signing.PrivateKey
    let leafKey: P256.Signing.PrivateKey
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate

    var rootDER: [UInt8] { Self.der(root) }
    var intermediateDER: [UInt8] { Self.der(intermediate) }
    var leafDER: [UInt8] { Self.der(leaf) }
    /// The header `x5c`: leaf, intermediate, root, standard Base64.
    var x5c: [String] { [leafDER, intermediateDER, rootDER].map { Data($0).base64EncodedString() } }

    init(_ options: Options = Options()) throws {
        rootKey = P256.Signing.PrivateKey()
        intermediateKey = P256.Signing.PrivateKey()
        leafKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName(options.rootName); OrganizationName("churnwatch tests") }
        let intermediateName = try DistinguishedName { CommonName("churnwatch Test WWDR CA G6"); OrganizationalUnitName("G6") }
        let leafName = try DistinguishedName { CommonName("churnwatch Test Receipt Signing") }
        let rootPublic = Certificate.PublicKey(rootKey.publicKey)
        let intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
        let leafPublic = Certificate.PublicKey(leafKey.publicKey)
        let full = options.fullProfile

        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: rootPublic,
            notValidBefore: Self.date("2020-01-01"), notValidAfter: Self.date("2040-01-01"),
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                if full {
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: rootPublic)
                }
            },
            issuerPrivateKey: .init(rootKey))

        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: intermediatePublic,
            notValidBefore: options.intermediateValidity.notBefore, notValidAfter: options.intermediateValidity.notAfter,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                if full {
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: intermediatePublic)
                    AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: rootPublic).keyIdentifier)
                }
                if options.intermediateHasAppleOID {
                    Certificate.Extension(oid: Self.wwdrOID, critical: false, value: [0x05, 0x00])
                }
            },
            issuerPrivateKey: .init(rootKey))

        leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: leafPublic,
            notValidBefore: options.leafValidity.notBefore, notValidAfter: options.leafValidity.notAfter,
            issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                if full {
                    Critical(KeyUsage(digitalSignature: true))
                    SubjectKeyIdentifier(hash: leafPublic)
                    AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: intermediatePublic).keyIdentifier)
                }
                if options.leafHasAppleOID {
                    Certificate.Extension(oid: Self.receiptSigningOID, critical: false, value: [0x05, 0x00])
                }
            },
            issuerPrivateKey: .init(intermediateKey))
    }

    static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    static func date(_ day: String) -> Date {
        let parts = day.split(separator: "-").map { Int($0)! }
        var c = DateComponents()
        (c.year, c.month, c.day) = (parts[0], parts[1], parts[2])
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: c)!
    }

    /// A compact JWS of `payload`, signed with `key` (the leaf's by default), with `header`
    /// (ES256 and this PKI's x5c by default).
    func sign(_ payload: some Encodable, header: JWSHeader? = nil, key: P256.Signing.PrivateKey? = nil) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payloadBytes = try encoder.encode(payload)
        return try sign(payloadBytes: Array(payloadBytes), header: header, key: key)
    }

    func sign(payloadBytes: [UInt8], header: JWSHeader? = nil, key: P256.Signing.PrivateKey? = nil) throws -> String {
        let headerBytes = try JSONEncoder().encode(header ?? JWSHeader(alg: "ES256", x5c: x5c))
        let input = Base64URL.encode(headerBytes) + "." + Base64URL.encode(payloadBytes)
        let signature = try (key ?? leafKey).signature(for: Data(input.utf8))
        return CompactJWS.serialize(signingInput: input, signature: signature.rawRepresentation)
    }
}

/// Payload factories with sensible defaults.
enum Payloads {
    static let bundleId = "com.example.churnwatch"

    static func transaction(
        transactionId: String = "2000000000000002", originalTransactionId: String = "2000000000000001",
        bundleId: String = Payloads.bundleId, environment: AppStoreEnvironment = .production,
        signedDate: EpochMilliseconds? = TestPKI.signedDate, expiresDate: EpochMilliseconds = 1_719_792_000_000
    ) -> JWSTransactionDecodedPayload {
        var t = JWSTransactionDecodedPayload(
            transactionId: transactionId, originalTransactionId: originalTransactionId,
            webOrderLineItemId: "2000000000000042", bundleId: bundleId, productId: "com.example.monthly",
            subscriptionGroupIdentifier: "21501453", purchaseDate: 1_717_113_600_000,
            originalPurchaseDate: 1_709_251_200_000, expiresDate: expiresDate, quantity: 1,
            signedDate: signedDate, storefront: "USA", storefrontId: "143441", price: 9_990, currency: "USD")
        t.type = .autoRenewableSubscription
        t.inAppOwnershipType = .purchased
        t.environment = environment
        t.transactionReason = .renewal
        return t
    }

    static func renewal(
        originalTransactionId: String = "2000000000000001", environment: AppStoreEnvironment = .production,
        autoRenew: AutoRenewStatus = .on
    ) -> JWSRenewalInfoDecodedPayload {
        var r = JWSRenewalInfoDecodedPayload(
            originalTransactionId: originalTransactionId, productId: "com.example.monthly",
            autoRenewProductId: "com.example.monthly", renewalDate: 1_719_792_000_000,
            renewalPrice: 9_990, currency: "USD", recentSubscriptionStartDate: 1_709_251_200_000,
            signedDate: TestPKI.signedDate)
        r.autoRenewStatus = autoRenew
        r.environment = environment
        return r
    }
}
