import AppStoreServerAPI
import ArgumentParser
import ChurnStore
import Foundation
import Logging

/// Apple settings: environment variables (APPSTORE_*), with these flags overriding them.
struct AppleOptions: ParsableArguments {
    @Option(name: .customLong("appstore-base-url"), help: ArgumentHelp("Production API base URL (default: $APPSTORE_BASE_URL, else the sandbox base URL when that is not Apple's, else Apple's).", valueName: "url"))
    var baseURL: String?

    @Option(name: .customLong("appstore-sandbox-base-url"), help: ArgumentHelp("Sandbox API base URL (default: $APPSTORE_SANDBOX_BASE_URL, else the production base URL when that is not Apple's, else Apple's sandbox).", valueName: "url"))
    var sandboxBaseURL: String?

    @Option(name: .customLong("appstore-environment"), help: "Production or Sandbox (default: $APPSTORE_ENVIRONMENT, else Production).")
    var environment: String?

    @Option(name: .customLong("appstore-root-certs"), help: ArgumentHelp("Trusted root certificates, comma-separated paths (default: $APPSTORE_ROOT_CERTS).", valueName: "paths"))
    var rootCerts: String?

    @Option(name: .customLong("appstore-tls-root-certs"), help: ArgumentHelp("CA certificates trusted for HTTPS besides the system's, comma-separated paths: a server behind a private CA (default: $APPSTORE_TLS_ROOT_CERTS).", valueName: "paths"))
    var tlsRootCerts: String?

    @Option(name: .customLong("status-rate"), parsing: .unconditional, help: "Get All Subscription Statuses requests per second (default: $APPSTORE_STATUS_RATE, else Apple's 50, Sandbox 5).")
    var statusRate: String?

    @Option(name: .customLong("history-rate"), parsing: .unconditional, help: "Get Transaction History requests per second (default: $APPSTORE_HISTORY_RATE, else Apple's 50, Sandbox 5).")
    var historyRate: String?

    /// The environment churnwatch is configured for: this flag, else APPSTORE_ENVIRONMENT, when
    /// it names Production or Sandbox (nil otherwise).
    func configuredEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> AppStoreEnvironment? {
        (environment ?? env[AppStoreConfiguration.Variable.environment]).flatMap(AppStoreEnvironment.init(registered:))
    }

    var overrides: [String: String] {
        var o: [String: String] = [:]
        typealias V = AppStoreConfiguration.Variable
        if let baseURL { o[V.baseURL] = baseURL }
        if let sandboxBaseURL { o[V.sandboxBaseURL] = sandboxBaseURL }
        if let environment { o[V.environment] = environment }
        if let rootCerts { o[V.rootCerts] = rootCerts }
        if let tlsRootCerts { o[V.tlsRootCerts] = tlsRootCerts }
        if let statusRate { o[V.statusRate] = statusRate }
        if let historyRate { o[V.historyRate] = historyRate }
        return o
    }

    /// The validated configuration; one line naming the setting (exit 78) when it is wrong.
    func configuration(logger: Logger) throws -> AppStoreConfiguration {
        do {
            let config = try AppStoreConfiguration.fromEnvironment(ProcessInfo.processInfo.environment, overrides: overrides)
            for warning in config.warnings { logger.warning("\(warning)") }
            return config
        } catch {
            throw CLIError.configuration(error.description)
        }
    }

    /// The settings of `app`'s own key, over the deployment's (none when it uses the
    /// deployment's key): its issuer and key id, and its key file or, from the variable it names,
    /// the PEM itself. One line when that variable is not set.
    static func keyOverrides(_ app: AppRecord, env: [String: String]) throws -> [String: String] {
        typealias V = AppStoreConfiguration.Variable
        guard let issuer = app.issuerId, let keyId = app.keyId else { return [:] }
        var o = [V.issuerId: issuer, V.keyId: keyId]
        if let file = app.keyFile {
            o[V.privateKeyPath] = file
        } else if let name = app.keyEnv {
            guard let pem = env[name], !pem.isEmpty else {
                throw CLIError.configuration("app \(app.bundleId): its key variable \(name) is not set (`churnwatch apps set` changes where its key is)")
            }
            (o[V.privateKeyPath], o[V.privateKey]) = ("", pem)
        }
        return o
    }

    /// What verifying signed data needs (roots, app, environment), without the In-App Purchase
    /// key: `inspect JWS|FILE|-`, as the deployment's app or as `app`. One line naming the setting
    /// (exit 78) when it is wrong.
    func verificationSettings(for app: AppRecord? = nil, logger: Logger) throws -> AppStoreVerificationSettings {
        typealias V = AppStoreConfiguration.Variable
        var o = overrides
        if let app {
            o[V.bundleId] = app.bundleId
            o[V.appAppleId] = app.appAppleId.map(String.init) ?? (app.isDefault ? nil : "")
            if environment == nil, let e = app.environment { o[V.environment] = e }
        }
        do {
            let settings = try AppStoreVerificationSettings.fromEnvironment(ProcessInfo.processInfo.environment, overrides: o)
            for warning in settings.warnings { logger.warning("\(warning)") }
            return settings
        } catch {
            throw CLIError.configuration(error.description)
        }
    }
}

extension AppleOptions {
    /// The configuration of `app`: the deployment's (this command's flags over APPSTORE_*), with
    /// the app's own settings from `churnwatch.apps` over the variables (the flags still win: they
    /// are this invocation's). An app other than the deployment's takes no app Apple id from
    /// APPSTORE_APP_APPLE_ID. One line naming the app and the setting (exit 78) when it is wrong.
    func configuration(for app: AppRecord, deploymentApp: String?, logger: Logger,
                       env: [String: String] = ProcessInfo.processInfo.environment) throws -> AppStoreConfiguration {
        typealias V = AppStoreConfiguration.Variable
        var o = overrides
        o[V.bundleId] = app.bundleId
        if let id = app.appAppleId { o[V.appAppleId] = String(id) } else if app.bundleId != deploymentApp { o[V.appAppleId] = "" }
        if environment == nil, let e = app.environment { o[V.environment] = e }
        if statusRate == nil, let r = app.statusRate { o[V.statusRate] = String(r) }
        if historyRate == nil, let r = app.historyRate { o[V.historyRate] = String(r) }
        o.merge(try Self.keyOverrides(app, env: env)) { _, own in own }
        do {
            let config = try AppStoreConfiguration.fromEnvironment(env, overrides: o)
            // The deployment's own warnings were logged with its configuration; an app's key may add its own.
            if app.keyId != nil { for warning in config.warnings { logger.warning("\(warning)", metadata: ["bundle_id": "\(app.bundleId)"]) } }
            return config
        } catch {
            throw CLIError.configuration("app \(app.bundleId): \(error.description)")
        }
    }
}
