import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
import X509

/// A test PKI shaped like Apple's App Store chain: a P-256 root, an intermediate carrying Apple's
/// WWDR OID (1.2.840.113635.100.6.2.1) and a leaf carrying the receipt-signing OID
/// (1.2.840.113635.100.6.11.1), both as non-critical extensions with an ASN.1 NULL value. The
/// leaf key signs JWS payloads whose header carries `x5c` = [leaf, intermediate, root].
public struct SigningChain: Sendable {
    public let rootDER: [UInt8]
    public let intermediateDER: [UInt8]
    public let leafDER: [UInt8]
    public let rootKey: P256.Signing.PrivateKey
    public let intermediateKey: P256.Signing.PrivateKey
    public let leafKey: P256.Signing.PrivateKey
    /// base64url of the JWS header `{"alg":"ES256","x5c":[...]}` (keys sorted), shared by every
    /// payload this chain signs.
    public let encodedHeader: String
    /// SHA-256 state after `encodedHeader + "."`, so a signature hashes only the payload part.
    private let headerHash: SHA256

    static let wwdrIntermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    static let receiptSigningLeafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]

    init(rootDER: [UInt8], intermediateDER: [UInt8], leafDER: [UInt8], rootKey: P256.Signing.PrivateKey,
         intermediateKey: P256.Signing.PrivateKey, leafKey: P256.Signing.PrivateKey) throws {
        self.rootDER = rootDER
        self.intermediateDER = intermediateDER
        self.leafDER = leafDER
        self.rootKey = rootKey
        self.intermediateKey = intermediateKey
        self.leafKey = leafKey
        let header = JWSHeader(alg: "ES256", x5c: [leafDER, intermediateDER, rootDER].map { Data($0).base64EncodedString() })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encodedHeader = Base64URL.encode(Array(try encoder.encode(header)))
        var h = SHA256()
        h.update(data: Array((encodedHeader + ".").utf8))
        headerHash = h
    }

    /// A new chain with fresh keys. `name` goes into the subjects ("appstore-sim", "rogue").
    public static func generate(name: String) throws -> SigningChain {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        func date(_ y: Int64) -> Date {
            Date(timeIntervalSince1970: Double(SimTime.daysFromCivil(year: y, month: 1, day: 1) * 86_400))
        }
        let rootName = try DistinguishedName {
            CountryName("US")
            OrganizationName("\(name) test PKI")
            CommonName("\(name) Root CA - G3 (TEST)")
        }
        let intermediateName = try DistinguishedName {
            CountryName("US")
            OrganizationName("\(name) test PKI")
            OrganizationalUnitName("G6")
            CommonName("\(name) Worldwide Developer Relations Certification Authority (TEST)")
        }
        let leafName = try DistinguishedName {
            CountryName("US")
            OrganizationName("\(name) test PKI")
            CommonName("\(name) Prod ECC Mac App Store and iTunes Store Receipt Signing (TEST)")
        }
        let rootPub = Certificate.PublicKey(rootKey.publicKey)
        let intermediatePub = Certificate.PublicKey(intermediateKey.publicKey)
        let leafPub = Certificate.PublicKey(leafKey.publicKey)
        let rootSKI = SubjectKeyIdentifier(hash: rootPub)
        let intermediateSKI = SubjectKeyIdentifier(hash: intermediatePub)
        let leafSKI = SubjectKeyIdentifier(hash: leafPub)
        let null: ArraySlice<UInt8> = [0x05, 0x00]

        let root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: rootPub,
            notValidBefore: date(2015), notValidAfter: date(2045), issuer: rootName, subject: rootName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                try Certificate.Extension(rootSKI, critical: false),
            ]),
            issuerPrivateKey: .init(rootKey))
        let intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: intermediatePub,
            notValidBefore: date(2015), notValidAfter: date(2045), issuer: rootName, subject: intermediateName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                try Certificate.Extension(intermediateSKI, critical: false),
                try Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: rootSKI.keyIdentifier), critical: false),
                Certificate.Extension(oid: wwdrIntermediateOID, critical: false, value: null),
            ]),
            issuerPrivateKey: .init(rootKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: leafPub,
            notValidBefore: date(2020), notValidAfter: date(2040), issuer: intermediateName, subject: leafName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true),
                try Certificate.Extension(KeyUsage(digitalSignature: true), critical: true),
                try Certificate.Extension(leafSKI, critical: false),
                try Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: intermediateSKI.keyIdentifier), critical: false),
                Certificate.Extension(oid: receiptSigningLeafOID, critical: false, value: null),
            ]),
            issuerPrivateKey: .init(intermediateKey))
        func der(_ c: Certificate) throws -> [UInt8] {
            var s = DER.Serializer()
            try s.serialize(c)
            return s.serializedBytes
        }
        return try SigningChain(
            rootDER: der(root), intermediateDER: der(intermediate), leafDER: der(leaf),
            rootKey: rootKey, intermediateKey: intermediateKey, leafKey: leafKey)
    }

    /// `base64url(payload) + "." + base64url(signature)`: a JWS without its (shared) header.
    public func signTail(payload: [UInt8]) throws -> String {
        var tail = SigningChain.base64URL(payload)
        let signature = try sign(encodedPayload: tail)
        tail.append(UInt8(ascii: "."))
        tail += SigningChain.base64URL(signature)
        return String(decoding: tail, as: UTF8.self)
    }

    /// The raw signature over `encodedHeader + "." + encodedPayload`.
    private func sign(encodedPayload: [UInt8]) throws -> [UInt8] {
        var h = headerHash
        h.update(data: encodedPayload)
        return Array(try leafKey.signature(for: h.finalize()).rawRepresentation)
    }

    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Unpadded base64url (a specialized copy of `Base64URL.encode`: this is the hot path of signing).
    static func base64URL(_ bytes: [UInt8]) -> [UInt8] {
        let n = bytes.count
        let count = (n / 3) * 4 + [0, 2, 3][n % 3]
        return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            alphabet.withUnsafeBufferPointer { a in
                bytes.withUnsafeBufferPointer { b in
                    var i = 0, o = 0
                    while i + 3 <= n {
                        let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2])
                        out[o] = a[Int(v >> 18)]
                        out[o + 1] = a[Int(v >> 12 & 63)]
                        out[o + 2] = a[Int(v >> 6 & 63)]
                        out[o + 3] = a[Int(v & 63)]
                        i += 3
                        o += 4
                    }
                    if n - i == 1 {
                        let v = UInt32(b[i]) << 16
                        out[o] = a[Int(v >> 18)]
                        out[o + 1] = a[Int(v >> 12 & 63)]
                    } else if n - i == 2 {
                        let v = UInt32(b[i]) << 16 | UInt32(b[i + 1]) << 8
                        out[o] = a[Int(v >> 18)]
                        out[o + 1] = a[Int(v >> 12 & 63)]
                        out[o + 2] = a[Int(v >> 6 & 63)]
                    }
                }
            }
            initialized = count
        }
    }

    /// The raw ES256 signature (`R||S`, 64 bytes) of the JWS of `payload` under this chain's header.
    public func signature(payload: [UInt8]) throws -> [UInt8] {
        try sign(encodedPayload: SigningChain.base64URL(payload))
    }

    /// A compact JWS of `payload`.
    public func sign(payload: [UInt8]) throws -> String {
        encodedHeader + "." + (try signTail(payload: payload))
    }

    /// A compact JWS of an encodable payload (JSON with sorted keys).
    public func sign(_ payload: some Encodable) throws -> String {
        try sign(payload: SigningChain.encode(payload))
    }

    /// One encoder for every payload (JSONEncoder is thread-safe once configured).
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func encode(_ value: some Encodable) throws -> [UInt8] {
        Array(try encoder.encode(value))
    }

    // MARK: Files

    /// Writes the certificates (DER) and keys (PKCS#8 PEM, mode 0600) as `<prefix>root.der`,
    /// `<prefix>root-key.pem`, and so on.
    func write(to dir: URL, prefix: String) throws {
        try FileIO.write(rootDER, to: dir.appendingPathComponent("\(prefix)root.der"), mode: 0o644)
        try FileIO.write(intermediateDER, to: dir.appendingPathComponent("\(prefix)intermediate.der"), mode: 0o644)
        try FileIO.write(leafDER, to: dir.appendingPathComponent("\(prefix)leaf.der"), mode: 0o644)
        try FileIO.write(Array(rootKey.pemRepresentation.utf8), to: dir.appendingPathComponent("\(prefix)root-key.pem"), mode: 0o600)
        try FileIO.write(Array(intermediateKey.pemRepresentation.utf8), to: dir.appendingPathComponent("\(prefix)intermediate-key.pem"), mode: 0o600)
        try FileIO.write(Array(leafKey.pemRepresentation.utf8), to: dir.appendingPathComponent("\(prefix)leaf-key.pem"), mode: 0o600)
    }

    /// Reads a chain written by ``write(to:prefix:)``; nil when any file is missing.
    static func read(from dir: URL, prefix: String) throws -> SigningChain? {
        func bytes(_ name: String) -> [UInt8]? { FileIO.read(dir.appendingPathComponent(prefix + name)) }
        guard let root = bytes("root.der"), let intermediate = bytes("intermediate.der"), let leaf = bytes("leaf.der"),
            let rk = bytes("root-key.pem"), let ik = bytes("intermediate-key.pem"), let lk = bytes("leaf-key.pem")
        else { return nil }
        return try SigningChain(
            rootDER: root, intermediateDER: intermediate, leafDER: leaf,
            rootKey: .init(pemRepresentation: String(decoding: rk, as: UTF8.self)),
            intermediateKey: .init(pemRepresentation: String(decoding: ik, as: UTF8.self)),
            leafKey: .init(pemRepresentation: String(decoding: lk, as: UTF8.self)))
    }
}

/// Small file helpers (atomic writes with a mode).
enum FileIO {
    static func write(_ bytes: [UInt8], to url: URL, mode: Int) throws {
        let tmp = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).tmp")
        guard FileManager.default.createFile(atPath: tmp.path, contents: Data(bytes), attributes: [.posixPermissions: mode])
        else { throw SimulatorError("cannot write \(tmp.path)") }
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: tmp.path)
        if FileManager.default.fileExists(atPath: url.path) { try FileManager.default.removeItem(at: url) }
        try FileManager.default.moveItem(at: tmp, to: url)
    }

    static func read(_ url: URL) -> [UInt8]? {
        FileManager.default.contents(atPath: url.path).map { Array($0) }
    }
}
