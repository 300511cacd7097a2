@testable import AppStoreServerAPI
import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@Suite("Configuration from the environment")
struct AppStoreConfigurationTests {
    let directory: URL
    let pki: TestPKI
    let key = P256.Signing.PrivateKey()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        pki = try TestPKI()
    }

    func write(_ name: String, _ content: String, mode: Int = 0o600) throws -> String {
        try write(name, Data(content.utf8), mode: mode)
    }

    func write(_ name: String, _ data: Data, mode: Int = 0o600) throws -> String {
        let url = directory.appendingPathComponent(name)
        try data.write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
        return url.path
    }

    func environment(_ changes: [String: String?] = [:]) throws -> [String: String] {
        var env = [
            "APPSTORE_ISSUER_ID": TestConfiguration.issuerId,
            "APPSTORE_KEY_ID": TestConfiguration.keyId,
            "APPSTORE_PRIVATE_KEY_PATH": try write("SubscriptionKey_2X9R4HXF34.p8", key.pemRepresentation),
            "APPSTORE_BUNDLE_ID": Payloads.bundleId,
            "APPSTORE_APP_APPLE_ID": "1234567890",
            "APPSTORE_ROOT_CERTS": try write("root.cer", Data(pki.rootDER)),
            "UNRELATED": "x",
        ]
        for (name, value) in changes { env[name] = value }
        return env
    }

    func expectError(_ setting: String, _ env: [String: String], contains text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try AppStoreConfiguration.fromEnvironment(env)
            Issue.record("accepted", sourceLocation: sourceLocation)
        } catch {
            #expect(error.setting == setting, sourceLocation: sourceLocation)
            #expect(error.description.hasPrefix("\(setting): "), sourceLocation: sourceLocation)
            #expect(error.description.contains(text), "\(error)", sourceLocation: sourceLocation)
            #expect(!error.description.contains("\n"), sourceLocation: sourceLocation)
            #expect(!error.description.contains("BEGIN"), sourceLocation: sourceLocation)
        }
    }

    @Test func validConfigurationWithDefaults() throws {
        let config = try AppStoreConfiguration.fromEnvironment(try environment())
        #expect(config.environment == .production)
        #expect(config.appAppleId == 1_234_567_890)
        #expect(config.signingKey.key.publicKey.rawRepresentation == key.publicKey.rawRepresentation)
        #expect(config.rootCertificates == [pki.root])
        #expect(config.baseURL(for: .production).absoluteString == "https://api.storekit.apple.com")
        #expect(config.baseURL(for: .sandbox).absoluteString == "https://api.storekit-sandbox.apple.com")
        #expect(config.verifyReceiptURL(for: .production).absoluteString == "https://buy.itunes.apple.com/verifyReceipt")
        #expect(config.verifyReceiptURL(for: .sandbox).absoluteString == "https://sandbox.itunes.apple.com/verifyReceipt")
        #expect(config.rateLimits == .apple)
        #expect(config.requestTimeout == 30)
        #expect(config.warnings.isEmpty)
        #expect(!"\(config)".contains("BEGIN") && !String(reflecting: config.signingKey).contains("BEGIN"))
    }

    @Test func overridesAndBaseURLs() throws {
        let env = try environment(["APPSTORE_ENVIRONMENT": "sandbox", "APPSTORE_APP_APPLE_ID": nil, "APPSTORE_STATUS_RATE": "2.5"])
        let config = try AppStoreConfiguration.fromEnvironment(env, overrides: [
            "APPSTORE_BASE_URL": "http://127.0.0.1:8080/", "APPSTORE_SANDBOX_BASE_URL": "http://127.0.0.1:8081",
            "APPSTORE_REQUEST_TIMEOUT": "7", "APPSTORE_MAX_ATTEMPTS": "3", "APPSTORE_SHARED_SECRET": "s3cret",
        ])
        #expect(config.environment == .sandbox && config.appAppleId == nil)
        #expect(config.baseURL(for: .production).absoluteString == "http://127.0.0.1:8080")
        #expect(config.verifyReceiptURL(for: .production).absoluteString == "http://127.0.0.1:8080/verifyReceipt")
        #expect(config.verifyReceiptURL(for: .sandbox).absoluteString == "http://127.0.0.1:8081/verifyReceipt")
        #expect(config.rateLimits.perSecond(RateLimitKey(.subscriptionStatuses, .sandbox)) == 2.5)
        #expect(config.requestTimeout == 7 && config.retryPolicy.maxAttempts == 3)
        #expect(config.sharedSecret?.value == "s3cret" && "\(config.sharedSecret!)" == "<redacted>")
    }

    @Test func aServerOfOurOwnServesBothEnvironmentsUnlessTheOtherIsConfiguredApart() throws {
        let env = try environment(["APPSTORE_BASE_URL": "http://127.0.0.1:9000/prefix/"])
        let config = try AppStoreConfiguration.fromEnvironment(env)
        #expect(config.baseURL(for: .production).absoluteString == "http://127.0.0.1:9000/prefix")
        #expect(config.baseURL(for: .sandbox).absoluteString == "http://127.0.0.1:9000/prefix")
        #expect(config.verifyReceiptURL(for: .sandbox).absoluteString == "http://127.0.0.1:9000/prefix/verifyReceipt")

        let sandboxOnly = try AppStoreConfiguration.fromEnvironment(try environment([
            "APPSTORE_ENVIRONMENT": "Sandbox", "APPSTORE_APP_APPLE_ID": nil, "APPSTORE_BASE_URL": "https://appstore.test.internal",
        ]))
        #expect(sandboxOnly.baseURL(for: .sandbox).absoluteString == "https://appstore.test.internal")

        let sandboxOverrideOnly = try AppStoreConfiguration.fromEnvironment(try environment([
            "APPSTORE_ENVIRONMENT": "Sandbox", "APPSTORE_APP_APPLE_ID": nil, "APPSTORE_SANDBOX_BASE_URL": "http://127.0.0.1:9001",
        ]))
        #expect(sandboxOverrideOnly.baseURL(for: .production).absoluteString == "http://127.0.0.1:9001")
        #expect(sandboxOverrideOnly.verifyReceiptURL(for: .production).absoluteString == "http://127.0.0.1:9001/verifyReceipt")

        let appleSandboxOnly = try AppStoreConfiguration.fromEnvironment(try environment([
            "APPSTORE_SANDBOX_BASE_URL": "https://api.storekit-sandbox.itunes.apple.com",
        ]))
        #expect(appleSandboxOnly.baseURL(for: .production).absoluteString == "https://api.storekit.apple.com")
    }

    @Test func applesOlderProductionHostPairsWithItsOwnSandboxHost() throws {
        let config = try AppStoreConfiguration.fromEnvironment(try environment(["APPSTORE_BASE_URL": "https://api.storekit.itunes.apple.com"]))
        #expect(config.baseURL(for: .production).absoluteString == "https://api.storekit.itunes.apple.com")
        #expect(config.baseURL(for: .sandbox).absoluteString == "https://api.storekit-sandbox.itunes.apple.com")
        #expect(config.verifyReceiptURL(for: .production).absoluteString == "https://buy.itunes.apple.com/verifyReceipt")
        #expect(config.verifyReceiptURL(for: .sandbox).absoluteString == "https://sandbox.itunes.apple.com/verifyReceipt")
    }

    @Test func unreadableKeyFile() throws {
        expectError("APPSTORE_PRIVATE_KEY_PATH", try environment(["APPSTORE_PRIVATE_KEY_PATH": directory.appendingPathComponent("missing.p8").path]), contains: "no such file")
    }

    @Test func keyThatIsNotAP256PKCS8Key() throws {
        let p384 = try write("p384.p8", P384.Signing.PrivateKey().pemRepresentation)
        expectError("APPSTORE_PRIVATE_KEY_PATH", try environment(["APPSTORE_PRIVATE_KEY_PATH": p384]), contains: "P-256")
        let sec1 = try write("sec1.pem", PEMDocument(type: "EC PRIVATE KEY", derBytes: [1, 2, 3]).pemString)
        expectError("APPSTORE_PRIVATE_KEY_PATH", try environment(["APPSTORE_PRIVATE_KEY_PATH": sec1]), contains: "PKCS#8")
        let garbage = try write("garbage.p8", "hello")
        expectError("APPSTORE_PRIVATE_KEY_PATH", try environment(["APPSTORE_PRIVATE_KEY_PATH": garbage]), contains: "not a PEM")
        let certificate = try write("cert.pem", PEMDocument(type: "CERTIFICATE", derBytes: pki.rootDER).pemString)
        expectError("APPSTORE_PRIVATE_KEY_PATH", try environment(["APPSTORE_PRIVATE_KEY_PATH": certificate]), contains: "CERTIFICATE")
    }

    @Test func missingAppAppleIdInProduction() throws {
        expectError("APPSTORE_APP_APPLE_ID", try environment(["APPSTORE_APP_APPLE_ID": nil]), contains: "required in Production")
        expectError("APPSTORE_APP_APPLE_ID", try environment(["APPSTORE_APP_APPLE_ID": "12ab"]), contains: "positive integer")
    }

    @Test func rootThatIsNotACACertificate() throws {
        let leaf = try write("leaf.pem", PEMDocument(type: "CERTIFICATE", derBytes: pki.leafDER).pemString)
        expectError("APPSTORE_ROOT_CERTS", try environment(["APPSTORE_ROOT_CERTS": leaf]), contains: "not a CA certificate")
        let junk = try write("junk.cer", Data([0x30, 0x03, 0x02, 0x01, 0x01]))
        expectError("APPSTORE_ROOT_CERTS", try environment(["APPSTORE_ROOT_CERTS": junk]), contains: "not an X.509 certificate")
        expectError("APPSTORE_ROOT_CERTS", try environment(["APPSTORE_ROOT_CERTS": nil]), contains: "required")
    }

    @Test func severalRootsInDERAndPEM() throws {
        let other = try TestPKI()
        let pem = try write("roots.pem", [pki.rootDER, other.rootDER].map { PEMDocument(type: "CERTIFICATE", derBytes: $0).pemString }.joined(separator: "\n"))
        let der = try write("third.cer", Data(try TestPKI().rootDER))
        let config = try AppStoreConfiguration.fromEnvironment(try environment(["APPSTORE_ROOT_CERTS": "\(pem), \(der)"]))
        #expect(config.rootCertificates.count == 3)
    }

    @Test("APPSTORE_TLS_ROOT_CERTS: optional; CA certificates in the same forms; anything else named in one error")
    func tlsRoots() throws {
        #expect(try AppStoreConfiguration.fromEnvironment(try environment([:])).tlsRootCertificates.isEmpty)
        let pem = try write("tls-ca.pem", PEMDocument(type: "CERTIFICATE", derBytes: try TestPKI().rootDER).pemString)
        let der = try write("tls-ca.cer", Data(pki.rootDER))
        let config = try AppStoreConfiguration.fromEnvironment(try environment(["APPSTORE_TLS_ROOT_CERTS": "\(pem),\(der)"]))
        #expect(config.tlsRootCertificates.count == 2)
        #expect(config.rootCertificates.count == 1, "the JWS roots are their own setting")
        let leaf = try write("tls-leaf.pem", PEMDocument(type: "CERTIFICATE", derBytes: pki.leafDER).pemString)
        expectError("APPSTORE_TLS_ROOT_CERTS", try environment(["APPSTORE_TLS_ROOT_CERTS": leaf]), contains: "not a CA certificate")
        expectError("APPSTORE_TLS_ROOT_CERTS", try environment(["APPSTORE_TLS_ROOT_CERTS": "/nonexistent/ca.pem"]), contains: "no such file")
        let key = try write("tls-key.pem", P256.Signing.PrivateKey().pemRepresentation)
        expectError("APPSTORE_TLS_ROOT_CERTS", try environment(["APPSTORE_TLS_ROOT_CERTS": key]), contains: "not an X.509 certificate")
    }

    @Test func otherBadSettings() throws {
        expectError("APPSTORE_ENVIRONMENT", try environment(["APPSTORE_ENVIRONMENT": "Staging"]), contains: "Production or Sandbox")
        expectError("APPSTORE_ISSUER_ID", try environment(["APPSTORE_ISSUER_ID": " "]), contains: "required")
        expectError("APPSTORE_BASE_URL", try environment(["APPSTORE_BASE_URL": "ftp://x"]), contains: "http(s) URL")
        expectError("APPSTORE_HISTORY_RATE", try environment(["APPSTORE_HISTORY_RATE": "-1"]), contains: "positive number")
        expectError("APPSTORE_REQUEST_TIMEOUT", try environment(["APPSTORE_REQUEST_TIMEOUT": "soon"]), contains: "positive number")
    }

    @Test("values that would trap later are refused at load, naming the setting (issue 18 item 5)")
    func valuesThatWouldTrapLater() throws {
        expectError("APPSTORE_BASE_URL", try environment(["APPSTORE_BASE_URL": "http://127.0.0.1:99999"]), contains: "port 99999")
        expectError("APPSTORE_SANDBOX_BASE_URL", try environment(["APPSTORE_SANDBOX_BASE_URL": "http://127.0.0.1:0"]), contains: "port 0")
        expectError("APPSTORE_REQUEST_TIMEOUT", try environment(["APPSTORE_REQUEST_TIMEOUT": "1e300"]), contains: "up to 86400")
        expectError("APPSTORE_MAX_RETRY_WAIT", try environment(["APPSTORE_MAX_RETRY_WAIT": "1e20"]), contains: "up to 86400")
        expectError("APPSTORE_STATUS_RATE", try environment(["APPSTORE_STATUS_RATE": "1e-300"]), contains: "0.001")
        let config = try AppStoreConfiguration.fromEnvironment(try environment(["APPSTORE_BASE_URL": "http://127.0.0.1:65535"]))
        #expect(config.productionBaseURL?.port == 65535)
    }

    @Test func warnsWhenOthersCanReadTheKey() throws {
        let open = try write("open.p8", key.pemRepresentation, mode: 0o644)
        let config = try AppStoreConfiguration.fromEnvironment(try environment(["APPSTORE_PRIVATE_KEY_PATH": open]))
        #expect(config.warnings.contains { $0.contains("readable by other users") })
    }
}
