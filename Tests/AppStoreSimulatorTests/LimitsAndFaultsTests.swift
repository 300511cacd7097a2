import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct LimitsAndFaultsTests {
    @Test func rateLimitAnswers429WithRetryAfterInEpochMilliseconds() async throws {
        var options = SimulatorOptions()
        // One token per 100 s: however slowly a loaded machine sends the three requests, the
        // bucket cannot refill between them.
        options.rate = 0.01
        options.burst = 2
        let sim = try await SimHarness.start(subscribers: 100, options: options)
        defer { Task { try? await sim.stop() } }
        let path = "/inApps/v1/subscriptions/\(sim.population.originalTransactionId(sim.productionSubscribers[0]))"
        let token = try sim.token()
        #expect(try await sim.get(path, token: token).status == 200)
        #expect(try await sim.get(path, token: token).status == 200)
        let beforeMs = Int64(Date().timeIntervalSince1970 * 1000)
        let limited = try await sim.get(path, token: token)
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(limited.status == 429)
        let e = try limited.decode(ErrorPayload.self)
        #expect(e.errorCode == 4_290_000)
        #expect(e.errorMessage == "Rate limit exceeded.")
        let retryAfter = try #require(Int64(limited.headers["retry-after"] ?? ""))
        // The next token comes after the moment the 429 was answered (between the two clocks read
        // here, however slowly a loaded machine ran the request).
        #expect(retryAfter > beforeMs)
        #expect(retryAfter <= nowMs + 100_000)
        // Buckets are per endpoint: history still has its own.
        let history = "/inApps/v2/history/\(sim.population.originalTransactionId(sim.productionSubscribers[0]))"
        #expect(try await sim.get(history, token: token).status == 200)
        let stats = try #require(try await sim.get("/_sim/stats", token: "").json as? [String: Any])
        #expect(stats["rate_limited"] as? Int == 1)
    }

    @Test func internalErrorIs5000001() async throws {
        var options = SimulatorOptions()
        options.errorRate = 1
        let sim = try await SimHarness.start(subscribers: 50, options: options)
        defer { Task { try? await sim.stop() } }
        let r = try await sim.get("/inApps/v1/subscriptions/\(sim.population.originalTransactionId(sim.productionSubscribers[0]))")
        #expect(r.status == 500)
        #expect(try r.decode(ErrorPayload.self).errorCode == 5_000_001)
    }

    @Test func latencyDelaysAnswers() async throws {
        var options = SimulatorOptions()
        options.latencyMs = 300
        let sim = try await SimHarness.start(subscribers: 50, options: options)
        defer { Task { try? await sim.stop() } }
        let started = Date()
        let r = try await sim.get("/inApps/v1/subscriptions/\(sim.population.originalTransactionId(sim.productionSubscribers[0]))")
        #expect(r.status == 200)
        #expect(Date().timeIntervalSince(started) >= 0.3)
    }

    @Test(arguments: PayloadFault.allCases)
    func payloadFaults(_ kind: PayloadFault) async throws {
        var options = SimulatorOptions()
        options.faultRate = 1
        options.faultKinds = [kind]
        let sim = try await SimHarness.start(subscribers: 100, options: options)
        defer { Task { try? await sim.stop() } }
        let verifier = try TestJWSVerifier(rootDER: sim.identity.chain.rootDER)
        let pop = sim.population
        let i = try #require(sim.productionSubscribers.first { pop.records[$0].partner < 0 && pop.state($0, at: pop.config.start).status == 2 })
        #expect(sim.service.fault(i) == kind)
        let s = try await sim.get("/inApps/v1/subscriptions/\(pop.originalTransactionId(i))").decode(StatusResponse.self)
        let item = try #require(s.data?.first?.lastTransactions?.first)
        let tx = try #require(item.signedTransactionInfo)
        let renewal = try #require(item.signedRenewalInfo)
        switch kind {
        case .rogueChain:
            await #expect(throws: TestJWSVerifier.Failure.chain) { try await verifier.verify(tx) }
            await #expect(throws: TestJWSVerifier.Failure.chain) { try await verifier.verify(renewal) }
            let rogue = try TestJWSVerifier(rootDER: sim.identity.rogueChain.rootDER)
            _ = try await rogue.verify(tx)
        case .truncatedJWS:
            await #expect(throws: (any Error).self) { try await verifier.verify(tx) }
            #expect(tx.count < sim.identity.chain.encodedHeader.count * 2)
        case .unknownValues:
            let t = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: Data(try await verifier.verify(tx)))
            let r = try JSONDecoder().decode(JWSRenewalInfoDecodedPayload.self, from: Data(try await verifier.verify(renewal)))
            #expect(t.rawTransactionReason == "RENEWAL_EXTENDED_FUTURE")
            #expect(t.transactionReason == nil)
            #expect(r.rawExpirationIntent == 9)
            #expect(r.expirationIntent == nil)
            let raw = try #require(try JSONSerialization.jsonObject(with: Data(try await verifier.verify(tx))) as? [String: Any])
            #expect(raw["zzFutureField"] != nil)
        case .foreignBundle:
            let t = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: Data(try await verifier.verify(tx)))
            #expect(t.bundleId != pop.config.bundleId)
        }
        // The truth names the fault so tests can expect churnwatch to quarantine these.
        let truth = try #require(try await sim.get("/_sim/truth", token: "").json as? [String: Any])
        let subs = try #require(truth["subscriptions"] as? [[String: Any]])
        #expect(subs.first { $0["original_transaction_id"] as? String == pop.originalTransactionId(i) }?["fault"] as? String == kind.rawValue)
    }
}

/// A wall-clock test, run by `ops/test` in a process of its own after the other suites (see
/// `SlowBodyWallClockTests`): beside the whole suite a 1 s client timeout fired after 22 s.
@Suite struct ConnectionFaultWallClockTests {
    @Test func droppedConnectionAndTimeout() async throws {
        var drop = SimulatorOptions()
        drop.dropRate = 1
        let a = try await SimHarness.start(subscribers: 50, options: drop)
        defer { Task { try? await a.stop() } }
        let path = "/inApps/v1/subscriptions/\(a.population.originalTransactionId(a.productionSubscribers[0]))"
        await #expect(throws: (any Error).self) { try await a.get(path, timeout: 5) }

        var hang = SimulatorOptions()
        hang.timeoutRate = 1
        hang.timeoutHoldMs = 30_000
        let b = try await SimHarness.start(subscribers: 50, options: hang)
        defer { Task { try? await b.stop() } }
        let started = Date()
        await #expect(throws: (any Error).self) { try await b.get(path, timeout: 1) }
        // The client gave up long before the 30 s hold ended.
        #expect(Date().timeIntervalSince(started) < 10)
        let stats = try #require(try await b.get("/_sim/stats", token: "").json as? [String: Any])
        #expect((stats["faults"] as? [String: Int])?["timeout"] == 1)
    }
}
