import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
import X509
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension AppStoreConfiguration {
    /// Variable names read by ``fromEnvironment(_:overrides:)``.
    public enum Variable {
        public static let issuerId = "APPSTORE_ISSUER_ID"
        public static let keyId = "APPSTORE_KEY_ID"
        public static let privateKeyPath = "APPSTORE_PRIVATE_KEY_PATH"
        /// The key itself (PEM), when no path is set: a secret handed over in a variable.
        public static let privateKey = "APPSTORE_PRIVATE_KEY"
        public static let bundleId = "APPSTORE_BUNDLE_ID"
        public static let appAppleId = "APPSTORE_APP_APPLE_ID"
        public static let environment = "APPSTORE_ENVIRONMENT"
        public static let baseURL = "APPSTORE_BASE_URL"
        public static let sandboxBaseURL = "APPSTORE_SANDBOX_BASE_URL"
        public static let rootCerts = "APPSTORE_ROOT_CERTS"
        public static let tlsRootCerts = "APPSTORE_TLS_ROOT_CERTS"
        public static let sharedSecret = "APPSTORE_SHARED_SECRET"
        public static let statusRate = "APPSTORE_STATUS_RATE"
        public static let historyRate = "APPSTORE_HISTORY_RATE"
        public static let transactionRate = "APPSTORE_TRANSACTION_RATE"
        public static let refundRate = "APPSTORE_REFUND_RATE"
        public static let receiptRate = "APPSTORE_RECEIPT_RATE"
        public static let notificationRate = "APPSTORE_NOTIFICATION_RATE"
        public static let requestTimeout = "APPSTORE_REQUEST_TIMEOUT"
        public static let maxAttempts = "APPSTORE_MAX_ATTEMPTS"
        public static let maxRetryWait = "APPSTORE_MAX_RETRY_WAIT"
        public static let strictX509 = "APPSTORE_STRICT_X509"

        /// Every variable, for `--help` texts and example files.
        public static let all = [
            issuerId, keyId, privateKeyPath, privateKey, bundleId, appAppleId, environment, baseURL, sandboxBaseURL,
            rootCerts, tlsRootCerts, sharedSecret, statusRate, historyRate, transactionRate, refundRate, receiptRate,
            notificationRate, requestTimeout, maxAttempts, maxRetryWait, strictX509,
        ]
    }

    /// Reads and validates the configuration from environment variables, with `overrides`
    /// (same names, e.g. from command-line flags) taking precedence. Reads the key and root
    /// certificate files. Throws the first problem as a ``ConfigurationError``.
    public static func fromEnvironment(
        _ env: [String: String], overrides: [String: String] = [:]
    ) throws(ConfigurationError) -> AppStoreConfiguration {
        let values = SettingValues(env.merging(overrides) { _, new in new })
        func value(_ name: String) -> String? { values[name] }
        func required(_ name: String, _ what: String) throws(ConfigurationError) -> String {
            try values.required(name, what)
        }
        var warnings: [String] = []

        let environment = try parseEnvironment(value(Variable.environment))

        let issuerId = try required(Variable.issuerId, "the issuer ID from App Store Connect")
        if UUID(uuidString: issuerId) == nil {
            warnings.append("\(Variable.issuerId) is not a UUID; Apple's issuer IDs are")
        }
        let keyId = try required(Variable.keyId, "the ID of the In-App Purchase key")
        let bundleId = try required(Variable.bundleId, "the app's bundle ID")

        let appAppleId = try parseAppAppleId(value(Variable.appAppleId), environment: environment)

        let key: P256.Signing.PrivateKey
        if value(Variable.privateKeyPath) == nil, let pem = value(Variable.privateKey) {
            key = try parsePrivateKey(pem, source: "the value", variable: Variable.privateKey)
        } else {
            let keyPath = try required(Variable.privateKeyPath, "path of the .p8 In-App Purchase key")
            key = try loadPrivateKey(at: keyPath, warnings: &warnings)
        }

        let productionBaseURL = try value(Variable.baseURL).map { v throws(ConfigurationError) in try parseURL(v, Variable.baseURL) }
        let sandboxBaseURL = try value(Variable.sandboxBaseURL).map { v throws(ConfigurationError) in try parseURL(v, Variable.sandboxBaseURL) }

        let rootsSetting = try required(Variable.rootCerts, "paths of trusted root certificates (Apple Root CA - G3)")
        let roots = try loadRootCertificates(paths: rootsSetting, variable: Variable.rootCerts)
        let tlsRoots = try value(Variable.tlsRootCerts).map { v throws(ConfigurationError) in
            try loadRootCertificates(paths: v, variable: Variable.tlsRootCerts)
        } ?? []

        var limits = AppStoreRateLimits.apple
        let rateVariables: [(String, AppStoreEndpoint)] = [
            (Variable.statusRate, .subscriptionStatuses), (Variable.historyRate, .transactionHistory),
            (Variable.transactionRate, .transactionInfo), (Variable.refundRate, .refundHistory),
            (Variable.receiptRate, .verifyReceipt), (Variable.notificationRate, .notificationHistory),
        ]
        for (name, endpoint) in rateVariables {
            guard let raw = value(name) else { continue }
            guard let rate = Double(raw), rate >= 0.001, rate <= 1_000_000 else {
                throw ConfigurationError(name, "must be a positive number of requests per second from 0.001 to 1000000, not '\(raw.prefix(40))'")
            }
            if environment == .sandbox { limits.sandbox[endpoint] = rate } else { limits.production[endpoint] = rate }
        }

        let timeout = try positiveNumber(value(Variable.requestTimeout), Variable.requestTimeout, default: 30)
        var retry = RetryPolicy()
        if let raw = value(Variable.maxAttempts) {
            guard let n = Int(raw), (1...100).contains(n) else {
                throw ConfigurationError(Variable.maxAttempts, "must be an integer from 1 to 100, not '\(raw.prefix(40))'")
            }
            retry.maxAttempts = n
        }
        retry.maxTotalWait = try positiveNumber(value(Variable.maxRetryWait), Variable.maxRetryWait, default: retry.maxTotalWait)

        let strict = try parseStrictX509(value(Variable.strictX509))

        return AppStoreConfiguration(
            issuerId: issuerId, keyId: keyId, signingKey: key, bundleId: bundleId, appAppleId: appAppleId,
            environment: environment, productionBaseURL: productionBaseURL, sandboxBaseURL: sandboxBaseURL,
            rootCertificates: roots, sharedSecret: value(Variable.sharedSecret), rateLimits: limits,
            requestTimeout: timeout, retryPolicy: retry, strictX509: strict, tlsRootCertificates: tlsRoots, warnings: warnings)
    }

    /// The longest request timeout or retry wait: a day. Longer values are typos, and values
    /// past about 292 years do not fit the clocks' nanoseconds.
    static let maximumSeconds: Double = 86_400

    private static func positiveNumber(_ raw: String?, _ name: String, default fallback: Double) throws(ConfigurationError) -> Double {
        guard let raw else { return fallback }
        guard let v = Double(raw), v > 0, v <= maximumSeconds else {
            throw ConfigurationError(name, "must be a positive number of seconds up to \(Int(maximumSeconds)) (a day), not '\(raw.prefix(40))'")
        }
        return v
    }

    private static func parseURL(_ raw: String, _ name: String) throws(ConfigurationError) -> URL {
        guard let url = URL(string: raw.trimmingSuffix("/")), let scheme = url.scheme?.lowercased(),
              scheme == "http" || scheme == "https", url.host != nil
        else { throw ConfigurationError(name, "must be an http(s) URL such as https://api.storekit.apple.com, not '\(raw.prefix(80))'") }
        guard url.query == nil, url.fragment == nil else {
            throw ConfigurationError(name, "must not have a query or fragment")
        }
        guard let host = url.host, !host.isEmpty else {
            throw ConfigurationError(name, "must name a host, not '\(raw.prefix(80))'")
        }
        if let port = url.port, !(1...65_535).contains(port) {
            throw ConfigurationError(name, "port \(port) is not a TCP port (1 to 65535)")
        }
        return url
    }

    /// Checks a .p8 key file as a configuration reads it (readable, a PEM PKCS#8 P-256 private
    /// key), before it is stored as an app's key; the message names `setting` and the file,
    /// never its content.
    public static func checkPrivateKeyFile(_ path: String, setting: String) throws(ConfigurationError) {
        var warnings: [String] = []
        _ = try loadPrivateKey(at: path, warnings: &warnings, name: setting)
    }

    /// Reads the .p8 key. Messages name the file, never its content.
    static func loadPrivateKey(at path: String, warnings: inout [String],
                               name: String = Variable.privateKeyPath) throws(ConfigurationError) -> P256.Signing.PrivateKey {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigurationError(name, "cannot read \(path): \(readFailure(path))")
        }
        guard let pem = String(data: data, encoding: .utf8) else {
            throw ConfigurationError(name, "\(path) is not a PEM file (expected the .p8 file: a PEM PRIVATE KEY block)")
        }
        let key = try parsePrivateKey(pem, source: path, variable: name)
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o044 != 0 {
            warnings.append("\(name): \(path) is readable by other users; chmod 600 it")
        }
        return key
    }

    /// Parses a .p8 key's PEM (`source`: what to call it in a message; never its content).
    static func parsePrivateKey(_ pem: String, source: String, variable name: String) throws(ConfigurationError) -> P256.Signing.PrivateKey {
        guard let document = try? PEMDocument(pemString: pem.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ConfigurationError(name, "\(source) is not a PEM file (expected the .p8 file: a PEM PRIVATE KEY block)")
        }
        guard document.discriminator == "PRIVATE KEY" else {
            throw ConfigurationError(name, "\(source) holds a \(document.discriminator), not a PKCS#8 PRIVATE KEY (the .p8 file from App Store Connect)")
        }
        guard let key = try? P256.Signing.PrivateKey(derRepresentation: document.derBytes) else {
            throw ConfigurationError(name, "\(source) is not a P-256 (prime256v1) PKCS#8 private key")
        }
        return key
    }

    /// Reads the files of a comma-separated list of paths (`variable`'s value); at least one certificate.
    static func loadRootCertificates(paths: String, variable: String) throws(ConfigurationError) -> [Certificate] {
        var roots: [Certificate] = []
        for path in paths.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !path.isEmpty {
            roots += try loadRootCertificates(at: path, variable: variable)
        }
        guard !roots.isEmpty else { throw ConfigurationError(variable, "no certificate paths given") }
        return roots
    }

    /// Reads one file of root certificates (DER, or PEM with one or more certificates); each must
    /// be a CA certificate.
    static func loadRootCertificates(at path: String, variable name: String) throws(ConfigurationError) -> [Certificate] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigurationError(name, "cannot read \(path): \(readFailure(path))")
        }
        var certificates: [Certificate] = []
        if let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") {
            guard let documents = try? PEMDocument.parseMultiple(pemString: text) else {
                throw ConfigurationError(name, "\(path) is not a valid PEM file")
            }
            for document in documents {
                guard document.discriminator == "CERTIFICATE", let cert = try? Certificate(derEncoded: document.derBytes) else {
                    throw ConfigurationError(name, "\(path) contains a \(document.discriminator) that is not an X.509 certificate")
                }
                certificates.append(cert)
            }
        } else {
            guard let cert = try? Certificate(derEncoded: Array(data)) else {
                throw ConfigurationError(name, "\(path) is not an X.509 certificate (DER or PEM)")
            }
            certificates.append(cert)
        }
        guard !certificates.isEmpty else { throw ConfigurationError(name, "\(path) holds no certificate") }
        for cert in certificates {
            guard case .isCertificateAuthority? = try? cert.extensions.basicConstraints else {
                throw ConfigurationError(name, "\(path): '\(cert.subject)' is not a CA certificate (no basicConstraints CA:TRUE)")
            }
        }
        return certificates
    }

    private static func readFailure(_ path: String) -> String {
        var directory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &directory) { return "no such file" }
        if directory.boolValue { return "a directory, not a file" }
        if !FileManager.default.isReadableFile(atPath: path) { return "permission denied" }
        return "unreadable"
    }
}
