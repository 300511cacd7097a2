import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
import X509

/// Verifies App Store signed data (compact JWS) exactly as Apple's libraries do in offline mode
/// (app-store-api.md §6), and decodes it.
///
/// Steps: three base64url parts; header `alg` = `ES256`; `x5c` of exactly three certificates;
/// a path from `x5c[0]` through `x5c[1]` to one of the **configured** roots (`x5c[2]` is never
/// trusted); Apple's OIDs on leaf and intermediate; every certificate of the path valid at the
/// payload's `signedDate`; the ES256 signature (raw `R||S`) with the leaf key; then bundle ID
/// (transactions) and environment.
///
/// Verified chains are cached by the leaf and intermediate DER bytes (and, in front of that, by
/// the encoded header, which identifies them), so a payload signed by a known chain costs one
/// base64url pass, one JSON decode and one ES256 verification. Certificate validity is kept per
/// cached chain and compared with each payload's `signedDate`.
///
/// Thread-safe; share one instance.
public final class SignedDataVerifier: Sendable {
    /// Tuning and strictness.
    public struct Options: Sendable {
        /// Also apply the certificate-profile rules OpenSSL enforces under `X509_STRICT`, as
        /// Apple's Python library does. Off by default, as in Apple's Swift library; Apple's own
        /// certificates pass either way.
        public var strictX509: Bool
        /// Largest encoded header accepted, in bytes. A real App Store header is about 4 KB.
        public var maxHeaderBytes: Int
        /// Most verified chains kept. Apple signs with one or two chains at a time.
        public var cacheCapacity: Int

        public init(strictX509: Bool = false, maxHeaderBytes: Int = 16 * 1024, cacheCapacity: Int = 64) {
            self.strictX509 = strictX509
            self.maxHeaderBytes = maxHeaderBytes
            self.cacheCapacity = cacheCapacity
        }
    }

    /// A chain that passed path validation: the leaf key and the validity of each certificate.
    struct VerifiedChain: Sendable {
        let leafKey: P256.Signing.PublicKey
        /// (role, notBefore ms, notAfter ms) for leaf, intermediate and root.
        let validity: [(JWSVerificationFailure.CertificateRole, Int64, Int64)]
    }

    public let bundleId: String
    private let roots: [Certificate]
    private let options: Options
    private let clock: any AppStoreClock
    private let byHeader = Locked<[[UInt8]: VerifiedChain]>([:])
    private let byCertificates = Locked<[[UInt8]: VerifiedChain]>([:])
    private let coldVerifications = Locked<Int>(0)

    /// - Parameters:
    ///   - rootCertificates: the only trust anchors (Apple Root CA - G3 in production).
    ///   - bundleId: checked against every transaction payload.
    ///   - clock: "now" for payloads without `signedDate`.
    public init(
        rootCertificates: [Certificate], bundleId: String, clock: any AppStoreClock = SystemClock(),
        options: Options = Options()
    ) {
        self.roots = rootCertificates
        self.bundleId = bundleId
        self.clock = clock
        self.options = options
    }

    /// How many times a chain was validated from scratch (cache misses). For tests and benchmarks.
    public var chainValidations: Int { coldVerifications.withLock { $0 } }

    /// Verifies and decodes a signed transaction (`signedTransactionInfo`, `signedTransactions[]`):
    /// signature and chain, then `bundleId`, then `environment`.
    public func verifyTransaction(
        _ jws: String, environment: AppStoreEnvironment
    ) async throws(JWSVerificationFailure) -> JWSTransactionDecodedPayload {
        let payload = try await verify(jws, as: JWSTransactionDecodedPayload.self)
        guard payload.bundleId == bundleId else {
            throw .bundleIdMismatch(expected: bundleId, actual: payload.bundleId)
        }
        guard payload.rawEnvironment == environment.rawValue else {
            throw .environmentMismatch(expected: environment.rawValue, actual: payload.rawEnvironment)
        }
        return payload
    }

    /// Verifies and decodes signed renewal info: signature and chain, then `environment` (renewal
    /// info has no bundle ID; bind it to its transaction through `originalTransactionId`).
    public func verifyRenewalInfo(
        _ jws: String, environment: AppStoreEnvironment
    ) async throws(JWSVerificationFailure) -> JWSRenewalInfoDecodedPayload {
        let payload = try await verify(jws, as: JWSRenewalInfoDecodedPayload.self)
        guard payload.rawEnvironment == environment.rawValue else {
            throw .environmentMismatch(expected: environment.rawValue, actual: payload.rawEnvironment)
        }
        return payload
    }

    /// Verifies the signature and certificate chain of any App Store JWS and decodes its payload
    /// as `T`. Checks no payload field other than the validation date.
    public func verify<T: SignedPayload>(_ jws: String, as type: T.Type) async throws(JWSVerificationFailure) -> T {
        try await verify(utf8: Array(jws.utf8), as: T.self)
    }

    private func verify<T: SignedPayload>(utf8: [UInt8], as type: T.Type) async throws(JWSVerificationFailure) -> T {
        var dots: [Int] = []
        for i in utf8.indices where utf8[i] == UInt8(ascii: ".") {
            dots.append(i)
            if dots.count > 2 { break }
        }
        guard dots.count == 2 else {
            throw .notThreeParts(dots.count == 3 ? utf8.lazy.filter { $0 == UInt8(ascii: ".") }.count + 1 : dots.count + 1)
        }
        let headerPart = utf8[0..<dots[0]]
        let payloadPart = utf8[(dots[0] + 1)..<dots[1]]
        let signaturePart = utf8[(dots[1] + 1)...]
        guard headerPart.count <= options.maxHeaderBytes else { throw .headerTooLarge(bytes: headerPart.count) }
        guard !payloadPart.isEmpty, let payloadBytes = Base64URL.decode(utf8: payloadPart) else {
            throw .invalidBase64URL(part: .payload)
        }

        // The header of a known chain is byte-identical from payload to payload.
        let headerKey = Array(headerPart)
        let cached = byHeader.withLock { $0[headerKey] }
        let header: JWSHeader?
        if cached == nil {
            guard !headerPart.isEmpty, let headerBytes = Base64URL.decode(utf8: headerPart) else {
                throw .invalidBase64URL(part: .header)
            }
            guard let decoded = try? JSONDecoder().decode(JWSHeader.self, from: Data(headerBytes)) else {
                throw .malformedHeader
            }
            header = decoded
        } else {
            header = nil
        }

        let payload: T
        do {
            payload = try JSONDecoder().decode(T.self, from: Data(payloadBytes))
        } catch {
            throw .malformedPayload
        }

        let chain: VerifiedChain
        if let cached {
            chain = cached
        } else {
            chain = try await verifyHeader(header!)
            byHeader.withLock {
                if $0.count >= options.cacheCapacity { $0.removeAll(keepingCapacity: true) }
                $0[headerKey] = chain
            }
        }

        let validationTime = payload.signedDateMilliseconds ?? EpochMilliseconds(clock.now()).rawValue
        for (role, notBefore, notAfter) in chain.validity {
            if validationTime < notBefore { throw .certificateNotYetValid(role) }
            if validationTime > notAfter { throw .certificateExpired(role) }
        }

        guard !signaturePart.isEmpty, let signatureBytes = Base64URL.decode(utf8: signaturePart) else {
            throw .invalidBase64URL(part: .signature)
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              chain.leafKey.isValidSignature(signature, for: utf8[0..<dots[1]])
        else { throw .invalidSignature }
        return payload
    }

    /// Header checks and path validation, answered from the certificate cache when possible.
    private func verifyHeader(_ header: JWSHeader) async throws(JWSVerificationFailure) -> VerifiedChain {
        guard header.alg == "ES256" else { throw .unsupportedAlgorithm(header.alg) }
        guard let x5c = header.x5c, !x5c.isEmpty else { throw .missingCertificateChain }
        guard x5c.count == 3 else { throw .wrongChainLength(x5c.count) }
        guard !roots.isEmpty else { throw .noTrustedRoots }
        guard let leafDER = Base64URL.decodeStandard(x5c[0]) else { throw .malformedCertificate(index: 0) }
        guard let intermediateDER = Base64URL.decodeStandard(x5c[1]) else { throw .malformedCertificate(index: 1) }

        let key = leafDER + intermediateDER
        if let known = byCertificates.withLock({ $0[key] }) { return known }

        guard let leaf = try? Certificate(derEncoded: leafDER) else { throw .malformedCertificate(index: 0) }
        guard let intermediate = try? Certificate(derEncoded: intermediateDER) else { throw .malformedCertificate(index: 1) }
        let chain = try await validatePath(leaf: leaf, intermediate: intermediate)
        byCertificates.withLock {
            if $0.count >= options.cacheCapacity { $0.removeAll(keepingCapacity: true) }
            $0[key] = chain
        }
        return chain
    }

    private func validatePath(leaf: Certificate, intermediate: Certificate) async throws(JWSVerificationFailure) -> VerifiedChain {
        coldVerifications.withLock { $0 += 1 }
        let failures = Locked<[JWSVerificationFailure]>([])
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            AppStoreChainPolicy(strict: options.strictX509, failures: failures)
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        switch result {
        case .couldNotValidate:
            throw failures.withLock { $0.first } ?? .untrustedChain
        case .validCertificate(let validated):
            let path = Array(validated)
            guard path.count == 3, let leafKey = P256.Signing.PublicKey(path[0].publicKey) else {
                throw .unsupportedLeafKey
            }
            let roles: [JWSVerificationFailure.CertificateRole] = [.leaf, .intermediate, .root]
            let validity = zip(roles, path).map { role, cert in
                (role, EpochMilliseconds(cert.notValidBefore).rawValue, EpochMilliseconds(cert.notValidAfter).rawValue)
            }
            return VerifiedChain(leafKey: leafKey, validity: validity)
        }
    }
}
