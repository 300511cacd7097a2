import SwiftASN1
@_spi(DisableValidityCheck) import X509
import Synchronization

/// The certificate-path policy Apple's libraries apply to an `x5c` chain, minus the validity
/// dates (checked per payload against `signedDate`, so a verified chain can be cached):
///
/// - RFC 5280 (version, basic constraints, name constraints) as swift-certificates implements it;
/// - the path is exactly leaf → intermediate → configured root;
/// - Apple's extension OIDs are present on the leaf and on the intermediate (presence only);
/// - with `strict`, the extra RFC 5280 profile rules OpenSSL applies under `X509_STRICT`
///   (which Apple's Python library sets).
///
/// Failures are recorded as typed reasons, since the verifier reports only strings.
struct AppStoreChainPolicy: VerifierPolicy {
    static let receiptSigningOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    static let wwdrIntermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    private let rfc5280 = RFC5280Policy.withValidityCheckDisabled()
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier]
    let strict: Bool
    /// Receives the typed reason of each candidate path that reached a root and was refused.
    /// A reference, because the verifier keeps its own copy of the policy.
    let failures: Failures

    /// The typed reasons the policy refused paths for, in order.
    final class Failures: Sendable {
        private let reasons = Mutex<[JWSVerificationFailure]>([])

        func record(_ failure: JWSVerificationFailure) { reasons.withLock { $0.append(failure) } }
        var first: JWSVerificationFailure? { reasons.withLock { $0.first } }
    }

    init(strict: Bool, failures: Failures) {
        self.strict = strict
        self.failures = failures
        // Critical extensions OpenSSL (Apple's Python library) recognises and so accepts when
        // marked critical, beyond the ones RFC 5280 path validation enforces; none of them
        // matters to a chain pinned to configured roots.
        self.verifyingCriticalExtensions = rfc5280.verifyingCriticalExtensions + [
            .X509ExtensionID.extendedKeyUsage, .X509ExtensionID.subjectAlternativeName, [2, 5, 29, 32],
        ]
    }

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        if let failure = evaluate(chain) {
            failures.record(failure)
            return .failsToMeetPolicy(reason: failure.description)
        }
        return .meetsPolicy
    }

    private func evaluate(_ chain: UnverifiedCertificateChain) -> JWSVerificationFailure? {
        guard chain.count == 3 else {
            return .chainPolicyViolation("path has \(chain.count) certificates instead of leaf, intermediate and root")
        }
        if case .failsToMeetPolicy(let reason) = rfc5280.chainMeetsPolicyRequirements(chain: chain) {
            return .chainPolicyViolation(reason.description)
        }
        if chain[0].extensions[oid: Self.receiptSigningOID] == nil { return .leafMissingAppleOID }
        if chain[1].extensions[oid: Self.wwdrIntermediateOID] == nil { return .intermediateMissingAppleOID }
        if strict, let why = Self.strictViolation(Array(chain)) { return .chainPolicyViolation(why) }
        return nil
    }

    /// The certificate-profile rules of OpenSSL's `X509_STRICT` that RFC 5280 path validation in
    /// swift-certificates does not apply. `nil` when the chain follows them.
    static func strictViolation(_ chain: [Certificate]) -> String? {
        let roles = ["leaf", "intermediate", "root"]
        for (i, cert) in chain.enumerated() {
            let role = roles[min(i, 2)]
            let ext = cert.extensions
            let bc: BasicConstraints?
            let ku: KeyUsage?
            do {
                bc = try ext.basicConstraints
                ku = try ext.keyUsage
                _ = try ext.subjectKeyIdentifier
                _ = try ext.authorityKeyIdentifier
            } catch {
                return "\(role) has an undecodable extension"
            }
            let isCA: Bool
            var pathLength: Int? = nil
            switch bc {
            case .isCertificateAuthority(let maxPathLength):
                isCA = true
                pathLength = maxPathLength
            default:
                isCA = false
            }
            if isCA {
                if ext[oid: .X509ExtensionID.basicConstraints]?.critical != true {
                    return "\(role) is a CA but its basicConstraints are not critical"
                }
                if ku == nil { return "\(role) is a CA without keyUsage" }
                if ext[oid: .X509ExtensionID.subjectKeyIdentifier] == nil {
                    return "\(role) is a CA without subjectKeyIdentifier"
                }
            } else {
                if ku?.keyCertSign == true { return "\(role) is not a CA but may sign certificates" }
                if pathLength != nil { return "\(role) has a path length but is not a CA" }
            }
            if i + 1 < chain.count && ext[oid: .X509ExtensionID.authorityKeyIdentifier] == nil {
                return "\(role) has no authorityKeyIdentifier"
            }
            if ext[oid: .X509ExtensionID.authorityKeyIdentifier]?.critical == true {
                return "\(role) marks authorityKeyIdentifier critical"
            }
            if ext[oid: .X509ExtensionID.subjectKeyIdentifier]?.critical == true {
                return "\(role) marks subjectKeyIdentifier critical"
            }
            if i > 0, let ku, !ku.keyCertSign { return "\(role) issues certificates without keyCertSign" }
            if cert.issuer.isEmpty { return "\(role) has an empty issuer" }
            if isCA && cert.subject.isEmpty { return "\(role) is a CA with an empty subject" }
        }
        return nil
    }
}
