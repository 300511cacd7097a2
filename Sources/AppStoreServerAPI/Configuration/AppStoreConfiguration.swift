import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
import X509

/// Everything the App Store client needs, validated.
///
/// Load it with ``fromEnvironment(_:overrides:)`` before any work starts; every problem is a
/// ``ConfigurationError`` naming the setting. Environment variables:
///
/// | Variable | Meaning | Default |
/// |---|---|---|
/// | `APPSTORE_ISSUER_ID` | Issuer ID (App Store Connect → Integrations → Keys) | required |
/// | `APPSTORE_KEY_ID` | Key ID of the In-App Purchase key | required |
/// | `APPSTORE_PRIVATE_KEY_PATH` | the `.p8` file: PEM PKCS#8 P-256 private key | required |
/// | `APPSTORE_BUNDLE_ID` | the app's bundle ID | required |
/// | `APPSTORE_APP_APPLE_ID` | the app's Apple ID (integer) | required in Production |
/// | `APPSTORE_ENVIRONMENT` | `Production` or `Sandbox` | `Production` |
/// | `APPSTORE_BASE_URL` | production host override (also `{base}/verifyReceipt`) | Apple |
/// | `APPSTORE_SANDBOX_BASE_URL` | sandbox host override (also `{base}/verifyReceipt`) | see ``baseURL(for:)`` |
/// | `APPSTORE_ROOT_CERTS` | trusted root CA certificates, comma-separated paths, DER or PEM | required |
/// | `APPSTORE_TLS_ROOT_CERTS` | CA certificates trusted for HTTPS besides the system's, same form | none |
/// | `APPSTORE_SHARED_SECRET` | shared secret for legacy verifyReceipt | none |
/// | `APPSTORE_STATUS_RATE`, `APPSTORE_HISTORY_RATE`, `APPSTORE_TRANSACTION_RATE`, `APPSTORE_REFUND_RATE`, `APPSTORE_RECEIPT_RATE` | requests/s in the configured environment | 50, 50, 50, 10, 50 (Sandbox: 10 %) |
/// | `APPSTORE_REQUEST_TIMEOUT` | seconds per HTTP request | 30 |
/// | `APPSTORE_MAX_ATTEMPTS` | attempts per call for temporary failures | 5 |
/// | `APPSTORE_MAX_RETRY_WAIT` | seconds one call may spend waiting (backoff, Retry-After, limiter) | 60 |
/// | `APPSTORE_STRICT_X509` | `1`/`true`: also apply OpenSSL X509_STRICT certificate rules | off |
public struct AppStoreConfiguration: Sendable, CustomStringConvertible {
    public static let defaultProductionBaseURL = URL(string: "https://api.storekit.apple.com")!
    public static let defaultSandboxBaseURL = URL(string: "https://api.storekit-sandbox.apple.com")!
    public static let defaultProductionReceiptURL = URL(string: "https://buy.itunes.apple.com/verifyReceipt")!
    public static let defaultSandboxReceiptURL = URL(string: "https://sandbox.itunes.apple.com/verifyReceipt")!

    public var issuerId: String
    public var keyId: String
    public var signingKey: AppStoreSigningKey
    public var bundleId: String
    public var appAppleId: Int64?
    /// `.production` or `.sandbox`: where calls go first and what payloads must say.
    public var environment: AppStoreEnvironment
    /// Replaces `https://api.storekit.apple.com` and, for verifyReceipt, `https://buy.itunes.apple.com`;
    /// when nil, ``baseURL(for:)`` may use a non-Apple `sandboxBaseURL`.
    public var productionBaseURL: URL?
    /// Replaces `https://api.storekit-sandbox.apple.com` and `https://sandbox.itunes.apple.com`;
    /// when nil, ``baseURL(for:)`` derives the sandbox host from `productionBaseURL`.
    public var sandboxBaseURL: URL?
    /// Roots of the signed payloads' x5c chains (Apple Root CA - G3 in production).
    public var rootCertificates: [Certificate]
    /// CA certificates trusted for the HTTPS connection, besides the system's bundle: a server
    /// implementing Apple's API behind a private CA, or a TLS-inspecting proxy. Empty for Apple.
    public var tlsRootCertificates: [Certificate]
    public var sharedSecret: RedactedString?
    public var rateLimits: AppStoreRateLimits
    /// Seconds per HTTP request.
    public var requestTimeout: TimeInterval
    public var retryPolicy: RetryPolicy
    public var strictX509: Bool
    /// Problems worth a log line that do not stop the program (e.g. a key file others can read).
    public var warnings: [String]

    public init(
        issuerId: String, keyId: String, signingKey: P256.Signing.PrivateKey, bundleId: String,
        appAppleId: Int64?, environment: AppStoreEnvironment, productionBaseURL: URL? = nil,
        sandboxBaseURL: URL? = nil, rootCertificates: [Certificate], sharedSecret: String? = nil,
        rateLimits: AppStoreRateLimits = .apple, requestTimeout: TimeInterval = 30,
        retryPolicy: RetryPolicy = RetryPolicy(), strictX509: Bool = false, tlsRootCertificates: [Certificate] = [],
        warnings: [String] = []
    ) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.signingKey = AppStoreSigningKey(signingKey)
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.productionBaseURL = productionBaseURL
        self.sandboxBaseURL = sandboxBaseURL
        self.rootCertificates = rootCertificates
        self.tlsRootCertificates = tlsRootCertificates
        self.sharedSecret = sharedSecret.map(RedactedString.init)
        self.rateLimits = rateLimits
        self.requestTimeout = requestTimeout
        self.retryPolicy = retryPolicy
        self.strictX509 = strictX509
        self.warnings = warnings
    }

    /// Apple's production hosts and their sandbox twins, for a production override without a
    /// sandbox one.
    static let appleSandboxHosts = [
        "api.storekit.apple.com": "https://api.storekit-sandbox.apple.com",
        "api.storekit.itunes.apple.com": "https://api.storekit-sandbox.itunes.apple.com",
    ]

    /// Every host of Apple's App Store Server API (recommended and older, both environments).
    static let appleAPIHosts: Set<String> = Set(appleSandboxHosts.keys).union(appleSandboxHosts.values.compactMap { URL(string: $0)?.host })

    /// The App Store Server API base URL for `environment`.
    ///
    /// Each environment's override, else the other environment's override when that is not one
    /// of Apple's hosts, else Apple's host (for Sandbox, the twin of an overridden Apple
    /// production host). An override that is not Apple's is another server implementing Apple's
    /// API (a simulator, a test double, a proxy): calls in the other environment (sandbox
    /// subscriptions, the retry of an id unknown in one environment, rows registered in the
    /// other) must reach that server too, never Apple's real hosts behind the operator's back.
    public func baseURL(for environment: AppStoreEnvironment) -> URL {
        func isApple(_ url: URL) -> Bool { url.host.map { Self.appleAPIHosts.contains($0.lowercased()) } ?? false }
        switch environment {
        case .production, .xcode, .localTesting:  // the last two have no server: production's
            if let productionBaseURL { return productionBaseURL }
            if let sandboxBaseURL, !isApple(sandboxBaseURL) { return sandboxBaseURL }
            return Self.defaultProductionBaseURL
        case .sandbox:
            if let sandboxBaseURL { return sandboxBaseURL }
            guard let productionBaseURL else { return Self.defaultSandboxBaseURL }
            if let host = productionBaseURL.host?.lowercased(), let twin = Self.appleSandboxHosts[host] {
                return URL(string: twin)!
            }
            return productionBaseURL
        }
    }

    /// The verifyReceipt URL for `environment`: `{base}/verifyReceipt` when ``baseURL(for:)``
    /// is not one of Apple's App Store Server API hosts, Apple's legacy host otherwise.
    public func verifyReceiptURL(for environment: AppStoreEnvironment) -> URL {
        let base = baseURL(for: environment)
        if let host = base.host?.lowercased(), Self.appleAPIHosts.contains(host) {
            return environment == .sandbox ? Self.defaultSandboxReceiptURL : Self.defaultProductionReceiptURL
        }
        return URL(string: base.absoluteString.trimmingSuffix("/") + "/verifyReceipt")!
    }

    public var description: String {
        "AppStoreConfiguration(environment: \(environment.rawValue), bundleId: \(bundleId), issuerId: \(issuerId), keyId: \(keyId), key: <redacted>, roots: \(rootCertificates.count))"
    }
}

extension String {
    func trimmingSuffix(_ suffix: Character) -> String {
        var s = self
        while s.last == suffix { s.removeLast() }
        return s
    }
}
