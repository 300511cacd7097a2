import AppStoreServerAPI
import ArgumentParser
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

    /// What verifying signed data needs (roots, app, environment), without the In-App Purchase
    /// key: `inspect JWS|FILE|-`. One line naming the setting (exit 78) when it is wrong.
    func verificationSettings(logger: Logger) throws -> AppStoreVerificationSettings {
        do {
            let settings = try AppStoreVerificationSettings.fromEnvironment(ProcessInfo.processInfo.environment, overrides: overrides)
            for warning in settings.warnings { logger.warning("\(warning)") }
            return settings
        } catch {
            throw CLIError.configuration(error.description)
        }
    }
}
