import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
import X509
import Synchronization

/// Verifies App Store signed data (compact JWS) exactly as Apple's libraries do in offline mode
/// (docs/apple-api.md, "Verifying"), and decodes it.
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
    /// Encoded headers already seen, most recent last (a handful at most).
    private let byHeader = Mutex<[(header: [UInt8], chain: VerifiedChain)]>([])
    private let byCertificates = Mutex<[[UInt8]: VerifiedChain]>([:])
    private let coldVerifications = Mutex<Int>(0)

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
        var jws = jws
        // Steady state: the header names a known chain; verify in place, without copying.
        let fast = jws.withUTF8 { utf8 -> Result<T, JWSVerificationFailure>? in
            let parts: Parts
            switch Parts.split(utf8, maxHeaderBytes: options.maxHeaderBytes) {
            case .success(let p): parts = p
            case .failure(let f): return .failure(f)
            }
            guard let chain = knownChain(forHeader: UnsafeBufferPointer(rebasing: utf8[parts.header])) else { return nil }
            return Result { () throws(JWSVerificationFailure) in try finish(utf8, parts, chain: chain, as: T.self) }
        }
        if let fast { return try fast.get() }

        let utf8 = Array(jws.utf8)
        let parts: Parts
        switch utf8.withUnsafeBufferPointer({ Parts.split($0, maxHeaderBytes: options.maxHeaderBytes) }) {
        case .success(let p): parts = p
        case .failure(let f): throw f
        }
        // Apple's order: the parts must decode before the chain is looked at.
        guard !parts.payload.isEmpty, Base64URL.decode(utf8: utf8[parts.payload]) != nil else {
            throw .invalidBase64URL(part: .payload)
        }
        guard !parts.header.isEmpty, let headerBytes = Base64URL.decode(utf8: utf8[parts.header]) else {
            throw .invalidBase64URL(part: .header)
        }
        guard let header = try? JSONDecoder().decode(JWSHeader.self, from: Data(headerBytes)) else {
            throw .malformedHeader
        }
        _ = try utf8.withUnsafeBufferPointer { b throws(JWSVerificationFailure) in try decodePayload(b, parts, as: T.self) }
        let chain = try await verifyHeader(header)
        let headerKey = Array(utf8[parts.header])
        byHeader.withLock { entries in
            if !entries.contains(where: { $0.header == headerKey }) {
                if entries.count >= 16 { entries.removeFirst() }
                entries.append((headerKey, chain))
            }
        }
        return try utf8.withUnsafeBufferPointer { b throws(JWSVerificationFailure) in try finish(b, parts, chain: chain, as: T.self) }
    }

    /// Byte ranges of the three parts of a compact JWS.
    struct Parts {
        var header: Range<Int>
        var payload: Range<Int>
        var signature: Range<Int>
        /// `header.payload`, the signed bytes.
        var signingInput: Range<Int> { header.lowerBound..<payload.upperBound }

        static func split(_ utf8: UnsafeBufferPointer<UInt8>, maxHeaderBytes: Int) -> Result<Parts, JWSVerificationFailure> {
            guard let (first, second) = CompactJWS.dots(in: utf8) else { return .failure(.notThreeParts(CompactJWS.partCount(in: utf8))) }
            guard first <= maxHeaderBytes else { return .failure(.headerTooLarge(bytes: first)) }
            return .success(Parts(header: 0..<first, payload: (first + 1)..<second, signature: (second + 1)..<utf8.count))
        }
    }

    private func knownChain(forHeader header: UnsafeBufferPointer<UInt8>) -> VerifiedChain? {
        byHeader.withLock { entries in
            for entry in entries where entry.header.count == header.count {
                let equal = entry.header.withUnsafeBufferPointer { memcmp($0.baseAddress!, header.baseAddress!, header.count) == 0 }
                if equal { return entry.chain }
            }
            return nil
        }
    }

    private func decodePayload<T: Decodable>(_ utf8: UnsafeBufferPointer<UInt8>, _ parts: Parts, as type: T.Type) throws(JWSVerificationFailure) -> T {
        guard !parts.payload.isEmpty, let bytes = Base64URL.decode(utf8: utf8[parts.payload]) else {
            throw .invalidBase64URL(part: .payload)
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw .malformedPayload
        }
    }

    /// Payload, validity at `signedDate`, then the ES256 signature.
    private func finish<T: SignedPayload>(
        _ utf8: UnsafeBufferPointer<UInt8>, _ parts: Parts, chain: VerifiedChain, as type: T.Type
    ) throws(JWSVerificationFailure) -> T {
        let payload = try decodePayload(utf8, parts, as: T.self)
        let validationTime = payload.signedDateMilliseconds ?? EpochMilliseconds(clock.now()).rawValue
        for (role, notBefore, notAfter) in chain.validity {
            if validationTime < notBefore { throw .certificateNotYetValid(role) }
            if validationTime > notAfter { throw .certificateExpired(role) }
        }
        guard !parts.signature.isEmpty, let signatureBytes = Base64URL.decode(utf8: utf8[parts.signature]) else {
            throw .invalidBase64URL(part: .signature)
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              chain.leafKey.isValidSignature(signature, for: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[parts.signingInput])))
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
        let failures = AppStoreChainPolicy.Failures()
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            AppStoreChainPolicy(strict: options.strictX509, failures: failures)
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        switch result {
        case .couldNotValidate:
            throw failures.first ?? .untrustedChain
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
