import AppStoreServerAPI
import Crypto
import Foundation
import SwiftASN1
import X509

/// An App Store-shaped chain for benchmarks: root, intermediate with Apple's WWDR OID, leaf with
/// the receipt-signing OID; certificates padded to the size of Apple's (about 1 KB each).
struct BenchPKI {
    let root: Certificate
    let leafKey: P256.Signing.PrivateKey
    let header: String

    init() throws {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        self.leafKey = leafKey
        let rootName = try DistinguishedName { CommonName("Bench Root CA - G3"); OrganizationName("churnwatch bench") }
        let intermediateName = try DistinguishedName { CommonName("Bench WWDR CA"); OrganizationalUnitName("G6") }
        let leafName = try DistinguishedName { CommonName("Bench Receipt Signing") }
        let padding = Certificate.Extension(oid: [1, 3, 6, 1, 4, 1, 99999, 1], critical: false, value: ArraySlice(repeating: 0x04, count: 500))
        let notBefore = Date(timeIntervalSince1970: 1_600_000_000)
        let notAfter = Date(timeIntervalSince1970: 2_100_000_000)

        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter, issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try .init {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(rootKey.publicKey))
            },
            issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter, issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try .init {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey))
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(rootKey.publicKey)).keyIdentifier)
                Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 2, 1], critical: false, value: [0x05, 0x00])
                padding
            },
            issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: notBefore,
            notValidAfter: notAfter, issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try .init {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                SubjectKeyIdentifier(hash: .init(leafKey.publicKey))
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey)).keyIdentifier)
                Certificate.Extension(oid: [1, 2, 840, 113635, 100, 6, 11, 1], critical: false, value: [0x05, 0x00])
                padding
            },
            issuerPrivateKey: .init(intermediateKey))
        let x5c = [leaf, intermediate, root].map { cert -> String in
            var s = DER.Serializer()
            try! s.serialize(cert)
            return Data(s.serializedBytes).base64EncodedString()
        }
        self.root = root
        header = Base64URL.encode(try JSONEncoder().encode(JWSHeader(alg: "ES256", x5c: x5c)))
    }

    func sign(_ payload: some Encodable) throws -> String {
        let input = header + "." + Base64URL.encode(try JSONEncoder().encode(payload))
        return CompactJWS.serialize(signingInput: input, signature: try leafKey.signature(for: Data(input.utf8)).rawRepresentation)
    }
}
