import AppStoreModels
import AppStoreServerAPI
import Foundation
import Logging
import Testing
import X509
@testable import AppStoreSimulator

/// What the simulator serves, read by churnwatch's own client and verifier.
@Suite struct ChurnwatchInteropTests {
    func configuration(_ sim: SimHarness) throws -> AppStoreConfiguration {
        AppStoreConfiguration(
            issuerId: sim.identity.issuerId, keyId: sim.identity.keyId, signingKey: sim.identity.apiKey,
            bundleId: sim.population.config.bundleId, appAppleId: sim.population.config.appAppleId,
            environment: .production, productionBaseURL: URL(string: "http://127.0.0.1:\(sim.port)")!,
            sandboxBaseURL: URL(string: "http://127.0.0.1:\(sim.sandboxPort)")!,
            rootCertificates: [try Certificate(derEncoded: sim.identity.chain.rootDER)],
            sharedSecret: sim.identity.sharedSecret,
            // Interop, not timing: on a loaded CI machine a page of signed records can take
            // longer than Apple's 30 s default, and a timeout here would say nothing about shapes.
            requestTimeout: 120)
    }

    @Test(arguments: [false, true])
    func payloadsVerifyWithChurnwatchsVerifier(strictX509: Bool) async throws {
        let sim = try await SimHarness.start(subscribers: 300)
        defer { Task { try? await sim.stop() } }
        let verifier = SignedDataVerifier(
            rootCertificates: [try Certificate(derEncoded: sim.identity.chain.rootDER)],
            bundleId: sim.population.config.bundleId, options: .init(strictX509: strictX509))
        for i in sim.productionSubscribers.prefix(60) {
            let s = try await sim.get("/inApps/v1/subscriptions/\(sim.population.originalTransactionId(i))").decode(StatusResponse.self)
            for item in s.data!.flatMap({ $0.lastTransactions! }) {
                let t = try await verifier.verifyTransaction(item.signedTransactionInfo!, environment: .production)
                let r = try await verifier.verifyRenewalInfo(item.signedRenewalInfo!, environment: .production)
                #expect(t.originalTransactionId == item.originalTransactionId)
                #expect(r.originalTransactionId == item.originalTransactionId)
            }
        }
    }

    @Test(arguments: PayloadFault.allCases)
    func churnwatchRejectsFaultPayloads(_ kind: PayloadFault) async throws {
        var options = SimulatorOptions()
        options.faultRate = 1
        options.faultKinds = [kind]
        let sim = try await SimHarness.start(subscribers: 60, options: options)
        defer { Task { try? await sim.stop() } }
        let verifier = SignedDataVerifier(
            rootCertificates: [try Certificate(derEncoded: sim.identity.chain.rootDER)],
            bundleId: sim.population.config.bundleId)
        let i = sim.productionSubscribers[0]
        let s = try await sim.get("/inApps/v1/subscriptions/\(sim.population.originalTransactionId(i))").decode(StatusResponse.self)
        let tx = s.data!.flatMap { $0.lastTransactions! }.first { $0.originalTransactionId == sim.population.originalTransactionId(i) }!
            .signedTransactionInfo!
        do {
            let t = try await verifier.verifyTransaction(tx, environment: .production)
            #expect(kind == .unknownValues, "\(kind) verified")
            #expect(t.transactionReason == nil)
            #expect(t.rawTransactionReason == "RENEWAL_EXTENDED_FUTURE")
        } catch {
            ChurnwatchInteropTests.expectRejectionFits(kind, error)
        }
    }

    @Test func churnwatchsClientReadsStatusHistoryAndFallsBackToSandbox() async throws {
        let sim = try await SimHarness.start(subscribers: 400) { $0.sandboxShare = 0.3 }
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let client = AppStoreServerAPIClient(configuration: try configuration(sim), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let prod = try #require(sim.productionSubscribers.first { pop.state($0, at: pop.config.start).transactionCount > 20 })
        let statuses = try #require(await client.subscriptionStatuses(for: pop.originalTransactionId(prod)).value)
        #expect(statuses.subscriptions.contains { $0.originalTransactionId == pop.originalTransactionId(prod) })
        let history = try #require(await client.transactionHistory(for: pop.originalTransactionId(prod)).value)
        let expected = pop.customerSubscriptions(prod).map { pop.stateAndTransactions($0, at: pop.config.start).1.count }.reduce(0, +)
        #expect(history.transactions.count == expected)
        #expect(history.pages == (expected + 19) / 20)

        let sandbox = try #require((0..<pop.count).first { pop.isSandbox($0) })
        let (outcome, env) = await client.withEnvironmentFallback { env in
            await client.subscriptionStatuses(for: pop.originalTransactionId(sandbox), environment: env)
        }
        #expect(env == .sandbox)
        #expect(outcome.value?.environment == .sandbox)
    }

    @Test func churnwatchsClientFollows21007ForSandboxReceipts() async throws {
        let sim = try await SimHarness.start(subscribers: 1500) {
            $0.sandboxShare = 0.3
            $0.receiptShare = 0.3
        }
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let client = AppStoreServerAPIClient(configuration: try configuration(sim), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let prod = try #require((0..<pop.count).first { !pop.isSandbox($0) && pop.receiptData($0) != nil })
        let sandbox = try #require((0..<pop.count).first { pop.isSandbox($0) && pop.receiptData($0) != nil })
        let p = try #require(await client.verifyReceipt(pop.receiptData(prod)!).value)
        #expect(p.environment == .production)
        #expect(p.response.status == 0)
        let s = try #require(await client.verifyReceipt(pop.receiptData(sandbox)!).value)
        #expect(s.environment == .sandbox)
        #expect(s.response.status == 0)
        #expect(s.response.pendingRenewalInfo?.contains { $0.originalTransactionId == pop.originalTransactionId(sandbox) } == true)
    }

    /// A payload fault is rejected for its own reason: a rogue chain as untrusted, a foreign
    /// bundle as a mismatch, a truncated JWS as unparseable.
    static func expectRejectionFits(_ kind: PayloadFault, _ error: JWSVerificationFailure,
                                    sourceLocation: SourceLocation = #_sourceLocation) {
        switch (kind, error) {
        case (.rogueChain, .untrustedChain), (.foreignBundle, .bundleIdMismatch): break
        case (.truncatedJWS, .notThreeParts), (.truncatedJWS, .invalidBase64URL), (.truncatedJWS, .malformedPayload),
            (.truncatedJWS, .malformedHeader):
            break
        default: Issue.record("\(kind): unexpected \(error)", sourceLocation: sourceLocation)
        }
    }
}
