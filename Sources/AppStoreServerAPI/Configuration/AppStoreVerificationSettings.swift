import AppStoreModels
import Foundation
import X509

/// What verifying signed App Store data needs, and nothing more: the trusted roots, the app
/// (bundle ID, Apple ID) and the environment payloads must name. No In-App Purchase key, no
/// hosts: `churnwatch inspect JWS|FILE|-` runs with these alone, on a machine that never talks
/// to Apple. ``AppStoreConfiguration`` (for calls to Apple) contains them.
public struct AppStoreVerificationSettings: Sendable {
    public var bundleId: String
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment
    public var rootCertificates: [Certificate]
    public var strictX509: Bool
    /// Problems worth a log line that do not stop the program.
    public var warnings: [String]

    public init(bundleId: String, appAppleId: Int64?, environment: AppStoreEnvironment, rootCertificates: [Certificate],
                strictX509: Bool = false, warnings: [String] = []) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.rootCertificates = rootCertificates
        self.strictX509 = strictX509
        self.warnings = warnings
    }

    /// Reads `APPSTORE_ENVIRONMENT`, `APPSTORE_BUNDLE_ID`, `APPSTORE_APP_APPLE_ID` (required in
    /// Production), `APPSTORE_ROOT_CERTS` and `APPSTORE_STRICT_X509`, with `overrides` taking
    /// precedence; every other setting (the key above all) is ignored. Throws the first problem.
    public static func fromEnvironment(
        _ env: [String: String], overrides: [String: String] = [:]
    ) throws(ConfigurationError) -> AppStoreVerificationSettings {
        typealias V = AppStoreConfiguration.Variable
        let values = AppStoreConfiguration.SettingValues(env.merging(overrides) { _, new in new })
        let environment = try AppStoreConfiguration.parseEnvironment(values[V.environment])
        let bundleId = try values.required(V.bundleId, "the app's bundle ID")
        let appAppleId = try AppStoreConfiguration.parseAppAppleId(values[V.appAppleId], environment: environment)
        let roots = try AppStoreConfiguration.loadRootCertificates(
            paths: values.required(V.rootCerts, "paths of trusted root certificates (Apple Root CA - G3)"), variable: V.rootCerts)
        let strict = try AppStoreConfiguration.parseStrictX509(values[V.strictX509])
        return AppStoreVerificationSettings(bundleId: bundleId, appAppleId: appAppleId, environment: environment,
                                            rootCertificates: roots, strictX509: strict)
    }
}

extension AppStoreConfiguration {
    /// The part of this configuration that verification needs.
    public var verificationSettings: AppStoreVerificationSettings {
        AppStoreVerificationSettings(bundleId: bundleId, appAppleId: appAppleId, environment: environment,
                                     rootCertificates: rootCertificates, strictX509: strictX509, warnings: warnings)
    }

    /// Setting values with blanks treated as absent.
    struct SettingValues {
        let values: [String: String]
        init(_ values: [String: String]) { self.values = values }

        subscript(name: String) -> String? {
            guard let v = values[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !v.isEmpty else { return nil }
            return v
        }

        func required(_ name: String, _ what: String) throws(ConfigurationError) -> String {
            guard let v = self[name] else { throw ConfigurationError(name, "required: \(what)") }
            return v
        }
    }

    /// `APPSTORE_ENVIRONMENT`, read as every environment name is (`AppStoreEnvironment(registered:)`); unset: Production.
    static func parseEnvironment(_ raw: String?) throws(ConfigurationError) -> AppStoreEnvironment {
        guard let raw else { return .production }
        guard let environment = AppStoreEnvironment(registered: raw) else {
            throw ConfigurationError(Variable.environment, "must be Production or Sandbox, not '\(raw.prefix(40))'")
        }
        return environment
    }

    static func parseAppAppleId(_ raw: String?, environment: AppStoreEnvironment) throws(ConfigurationError) -> Int64? {
        if let raw {
            guard let id = Int64(raw), id > 0 else {
                throw ConfigurationError(Variable.appAppleId, "must be a positive integer, not '\(raw.prefix(40))'")
            }
            return id
        }
        if environment == .production {
            throw ConfigurationError(Variable.appAppleId, "required in Production (the app's Apple ID, a number)")
        }
        return nil
    }

    static func parseStrictX509(_ raw: String?) throws(ConfigurationError) -> Bool {
        guard let raw = raw?.lowercased() else { return false }
        switch raw {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(Variable.strictX509, "must be true or false, not '\(raw.prefix(40))'")
        }
    }
}
