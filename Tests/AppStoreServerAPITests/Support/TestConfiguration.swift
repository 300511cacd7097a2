@testable import AppStoreServerAPI
import Crypto
import Foundation
import Logging

enum TestConfiguration {
    static let issuerId = "57246542-96fe-1a63-e053-0824d011072a"
    static let keyId = "2X9R4HXF34"

    static func make(
        pki: TestPKI, key: P256.Signing.PrivateKey = P256.Signing.PrivateKey(),
        environment: AppStoreEnvironment = .production, baseURL: URL? = URL(string: "https://prod.test"),
        sandboxBaseURL: URL? = URL(string: "https://sandbox.test"), retry: RetryPolicy = RetryPolicy(),
        limits: AppStoreRateLimits = .apple, requestTimeout: TimeInterval = 5
    ) -> AppStoreConfiguration {
        AppStoreConfiguration(
            issuerId: issuerId, keyId: keyId, signingKey: key, bundleId: Payloads.bundleId, appAppleId: 1_234_567_890,
            environment: environment, productionBaseURL: baseURL, sandboxBaseURL: sandboxBaseURL,
            rootCertificates: [pki.root], sharedSecret: "cafebabe", rateLimits: limits, requestTimeout: requestTimeout,
            retryPolicy: retry)
    }

    /// A client over `transport` on virtual time, with jitter fixed at `unit`.
    static func client(
        pki: TestPKI, transport: any HTTPTransport, clock: TestClock, unit: Double = 0.5,
        environment: AppStoreEnvironment = .production, retry: RetryPolicy = RetryPolicy(),
        limits: AppStoreRateLimits = .apple, key: P256.Signing.PrivateKey = P256.Signing.PrivateKey()
    ) -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(
            configuration: make(pki: pki, key: key, environment: environment, retry: retry, limits: limits),
            transport: transport, clock: clock, random: { unit }, logger: .silent)
    }
}

/// Canned App Store responses signed with a test PKI.
struct Responses {
    let pki: TestPKI

    func status(originalTransactionId: String = "2000000000000001", environment: AppStoreEnvironment = .production) throws -> StatusResponse {
        let item = LastTransactionsItem(
            rawStatus: 1, originalTransactionId: originalTransactionId,
            signedTransactionInfo: try pki.sign(Payloads.transaction(originalTransactionId: originalTransactionId, environment: environment)),
            signedRenewalInfo: try pki.sign(Payloads.renewal(originalTransactionId: originalTransactionId, environment: environment)))
        return StatusResponse(
            rawEnvironment: environment.rawValue, bundleId: Payloads.bundleId, appAppleId: 1_234_567_890,
            data: [SubscriptionGroupIdentifierItem(subscriptionGroupIdentifier: "21501453", lastTransactions: [item])])
    }

    func history(page: Int, of pages: Int, perPage: Int = 2, environment: AppStoreEnvironment = .production) throws -> HistoryResponse {
        let signed = try (0..<perPage).map { i in
            try pki.sign(Payloads.transaction(transactionId: "\(page * 100 + i)", environment: environment))
        }
        return HistoryResponse(
            revision: "rev-\(page + 1)", hasMore: page + 1 < pages, bundleId: Payloads.bundleId, appAppleId: 1_234_567_890,
            rawEnvironment: environment.rawValue, signedTransactions: signed)
    }
}

extension Logger {
    /// For clients whose log lines a test does not look at (the client takes its logger from
    /// the caller).
    static let silent = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
}
