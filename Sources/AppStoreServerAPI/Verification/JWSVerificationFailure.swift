/// Why a signed payload (compact JWS) was rejected. One case per way verification can fail.
///
/// ``appleStatus`` names the status Apple's Python library (`VerificationStatus`) reports for
/// the same input, for comparison.
public enum JWSVerificationFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// Which certificate of the chain a failure is about.
    public enum CertificateRole: String, Hashable, Sendable {
        case leaf, intermediate, root
    }

    /// Not exactly three dot-separated parts.
    case notThreeParts(Int)
    /// A part is empty or not strict base64url.
    case invalidBase64URL(part: CompactPart)
    /// The encoded header is larger than the verifier accepts.
    case headerTooLarge(bytes: Int)
    /// The header is not a JSON object of the JWS header shape.
    case malformedHeader
    /// The payload is not a JSON object of the expected type.
    case malformedPayload
    /// `alg` is not `ES256` (for example `none` or `HS256`).
    case unsupportedAlgorithm(String?)
    /// No `x5c` or an empty one.
    case missingCertificateChain
    /// `x5c` does not hold exactly three certificates.
    case wrongChainLength(Int)
    /// `x5c[index]` is not standard Base64 of a DER X.509 certificate.
    case malformedCertificate(index: Int)
    /// The verifier has no trusted root certificates.
    case noTrustedRoots
    /// No path from the leaf through the intermediate to a configured root, or a certificate
    /// signature on the path does not verify.
    case untrustedChain
    /// The path reaches a configured root but breaks an RFC 5280 rule (or, in strict mode, an
    /// OpenSSL `X509_STRICT` rule); the text says which.
    case chainPolicyViolation(String)
    /// The leaf lacks Apple's receipt-signing extension 1.2.840.113635.100.6.11.1.
    case leafMissingAppleOID
    /// The intermediate lacks Apple's WWDR extension 1.2.840.113635.100.6.2.1.
    case intermediateMissingAppleOID
    /// A certificate of the chain had expired at the payload's `signedDate`.
    case certificateExpired(CertificateRole)
    /// A certificate of the chain was not yet valid at the payload's `signedDate`.
    case certificateNotYetValid(CertificateRole)
    /// The leaf's public key is not a P-256 key.
    case unsupportedLeafKey
    /// The ES256 signature does not verify with the leaf's key.
    case invalidSignature
    /// The transaction's `bundleId` is not the configured one.
    case bundleIdMismatch(expected: String, actual: String?)
    /// The payload's `environment` is not the expected one.
    case environmentMismatch(expected: String, actual: String?)
    /// Signed data inside a response describes another subscription than the item carrying it.
    case originalTransactionIdMismatch(expected: String?, actual: String?)
    /// A Production notification's `appAppleId` is not the configured one (nil: none configured).
    case appAppleIdMismatch(expected: Int64?, actual: Int64?)

    /// The parts of a compact JWS.
    public enum CompactPart: String, Hashable, Sendable {
        case header, payload, signature
    }

    /// Apple's Python `VerificationStatus` name for this failure.
    public var appleStatus: String {
        switch self {
        case .wrongChainLength: "INVALID_CHAIN_LENGTH"
        case .noTrustedRoots, .malformedCertificate: "INVALID_CERTIFICATE"
        case .bundleIdMismatch, .appAppleIdMismatch: "INVALID_APP_IDENTIFIER"
        case .environmentMismatch: "INVALID_ENVIRONMENT"
        default: "VERIFICATION_FAILURE"
        }
    }

    public var description: String {
        switch self {
        case .notThreeParts(let n): "not a compact JWS: \(n) parts instead of 3"
        case .invalidBase64URL(let part): "the \(part.rawValue) is not base64url"
        case .headerTooLarge(let n): "header of \(n) bytes is too large"
        case .malformedHeader: "header is not a JWS header JSON object"
        case .malformedPayload: "payload is not the expected JSON object"
        case .unsupportedAlgorithm(let alg): "algorithm \(alg.map { "'\($0)'" } ?? "(none)") is not ES256"
        case .missingCertificateChain: "header has no x5c certificate chain"
        case .wrongChainLength(let n): "x5c holds \(n) certificates instead of 3"
        case .malformedCertificate(let i): "x5c[\(i)] is not a DER certificate in Base64"
        case .noTrustedRoots: "no trusted root certificates are configured"
        case .untrustedChain: "certificate chain does not lead to a configured root"
        case .chainPolicyViolation(let why): "certificate chain breaks policy: \(why)"
        case .leafMissingAppleOID: "leaf certificate lacks Apple's receipt-signing OID 1.2.840.113635.100.6.11.1"
        case .intermediateMissingAppleOID: "intermediate certificate lacks Apple's WWDR OID 1.2.840.113635.100.6.2.1"
        case .certificateExpired(let role): "\(role.rawValue) certificate had expired at signedDate"
        case .certificateNotYetValid(let role): "\(role.rawValue) certificate was not yet valid at signedDate"
        case .unsupportedLeafKey: "leaf certificate key is not P-256"
        case .invalidSignature: "ES256 signature does not verify with the leaf key"
        case .bundleIdMismatch(let e, let a): "bundleId \(a.map { "'\($0)'" } ?? "(none)") is not the configured '\(e)'"
        case .environmentMismatch(let e, let a): "environment \(a.map { "'\($0)'" } ?? "(none)") is not the expected '\(e)'"
        case .originalTransactionIdMismatch(let e, let a):
            "signed originalTransactionId \(a ?? "(none)") does not match \(e ?? "(none)")"
        case .appAppleIdMismatch(let e, let a):
            "appAppleId \(a.map(String.init) ?? "(none)") is not the configured \(e.map(String.init) ?? "(none: set APPSTORE_APP_APPLE_ID)")"
        }
    }
}
