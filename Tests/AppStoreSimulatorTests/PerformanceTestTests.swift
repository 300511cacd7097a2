import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// `POST /inApps/v1/messaging/performanceTest` against loopback servers: signed real-time
/// requests for a Sandbox subscription, PASS from a server that answers valid bodies in time,
/// FAIL from a slow one; a PASS lets the Production URL be set.
@Suite struct PerformanceTestTests {
    static func options(requests: Int, concurrency: Int, thresholdMs: Int64, durationMs: Int64 = 60_000) -> SimulatorOptions {
        var o = SimulatorOptions()
        o.retention.performanceTest.totalRequests = requests
        o.retention.performanceTest.maxConcurrentRequests = concurrency
        o.retention.performanceTest.responseTimeThresholdMs = thresholdMs
        o.retention.performanceTest.totalDurationMs = durationMs
        return o
    }

    /// A Sandbox and a Production subscription that exist now.
    static func subscriptions(_ sim: SimHarness) throws -> (sandbox: String, production: String) {
        let p = sim.population, now = sim.now
        let sandbox = try #require((0..<p.count).first { p.isSandbox($0) && p.exists($0, at: now) })
        let production = try #require(sim.productionSubscribers.first { p.exists($0, at: now) })
        return (p.originalTransactionId(sandbox), p.originalTransactionId(production))
    }

    @Test("a server answering valid bodies in time passes: every request signed for the Sandbox subscription; then Production may be set")
    func passes() async throws {
        let messageId = UUID().uuidString.lowercased()
        let receiver = try LoopbackReceiver { _ in .json("{\"message\":{\"messageIdentifier\":\"\(messageId)\"}}") }
        defer { receiver.stop() }
        let sim = try await SimHarness.start(subscribers: 400, options: Self.options(requests: 30, concurrency: 5, thresholdMs: 30_000, durationMs: 600_000))
        defer { Task { try? await sim.stop() } }
        let (sandbox, production) = try Self.subscriptions(sim)
        #expect(try await sim.messaging("POST", "performanceTest", json: ["originalTransactionId": sandbox]).errorCode == 4_040_021,
                "no Sandbox URL yet")
        #expect(try await sim.messaging("PUT", "realtime/url", sandbox: true, json: ["realtimeURL": receiver.url]).status == 200)
        #expect(try await sim.messaging("POST", "performanceTest", json: ["originalTransactionId": production]).errorCode == 4_000_211)
        #expect(try await sim.messaging("POST", "performanceTest", json: ["originalTransactionId": "200000099999000"]).errorCode == 4_040_005)
        #expect(try await sim.messaging("POST", "performanceTest", json: ["nothing": 1]).errorCode == 4_000_211)
        #expect(try await sim.messaging("GET", "performanceTest/result/nope").errorCode == 4_000_212)
        #expect(try await sim.messaging("GET", "performanceTest/result/\(UUID().uuidString)").errorCode == 4_040_018)

        let started = try await sim.messaging("POST", "performanceTest", json: ["originalTransactionId": sandbox])
        let response = try started.decode(RetentionWire.PerformanceTestResponse.self)
        #expect(response.config.totalRequests == 30 && response.config.maxConcurrentRequests == 5)
        #expect(response.config.responseTimeThreshold == 30_000 && response.config.successRateThreshold == 95)
        #expect(response.config.totalDuration == 600_000)
        await sim.app(1).messaging.testTask(response.requestId)?.value
        let result = try await sim.messaging("GET", "performanceTest/result/\(response.requestId)")
            .decode(RetentionWire.PerformanceTestResult.self)
        #expect(result.result == "PASS" && result.successRate == 100 && result.numPending == 0 && result.failures.isEmpty)
        #expect(result.target == receiver.url)
        let times = try #require(result.responseTimes)
        #expect(times.p50 <= times.p90 && times.p90 <= times.p95 && times.p95 <= times.p99 && times.p99 < 30_000)
        let requests = receiver.requests
        #expect(requests.count == 30 && requests.allSatisfy { $0.method == "POST" && $0.target == "/apple/retention-message" })
        let verifier = try TestJWSVerifier(rootDER: sim.identity.chain.rootDER)
        var identifiers = Set<String>()
        for r in requests {
            let payload = try await realtimeRequest(r.body, verifier: verifier)
            #expect(payload.originalTransactionId == sandbox && payload.rawEnvironment == "Sandbox")
            #expect(payload.appAppleId == sim.population.config.appAppleId && payload.signedDate.rawValue == sim.now)
            identifiers.insert(payload.requestIdentifier)
        }
        #expect(identifiers.count == 30, "a requestIdentifier per request")
        #expect(try await sim.messaging("PUT", "realtime/url", json: ["realtimeURL": receiver.url]).status == 200)
    }

    @Test("a slow server fails (TIMED_OUT), PENDING with requests pending while it runs, one test at a time; Production stays forbidden")
    func slowServerFails() async throws {
        let receiver = try LoopbackReceiver { _ in
            Thread.sleep(forTimeInterval: 0.8)  // the server's own slowness, not synchronization
            return .json("{\"message\":{\"messageIdentifier\":\"\(UUID().uuidString)\"}}")
        }
        defer { receiver.stop() }
        let sim = try await SimHarness.start(subscribers: 400, options: Self.options(requests: 10, concurrency: 5, thresholdMs: 150))
        defer { Task { try? await sim.stop() } }
        let (sandbox, _) = try Self.subscriptions(sim)
        #expect(try await sim.messaging("PUT", "realtime/url", sandbox: true, json: ["realtimeURL": receiver.url]).status == 200)
        let started = try await sim.messaging("POST", "performanceTest", json: ["originalTransactionId": sandbox])
        let id = try started.decode(RetentionWire.PerformanceTestResponse.self).requestId
        // Two waves of requests held at least 650 ms each: the test cannot be over yet.
        let pending = try await sim.messaging("GET", "performanceTest/result/\(id)").decode(RetentionWire.PerformanceTestResult.self)
        #expect(pending.result == "PENDING" && pending.numPending > 0)
        let second = try await sim.messaging("POST", "performanceTest", json: ["originalTransactionId": sandbox])
        #expect(second.errorCode == 4_000_213)
        await sim.app(1).messaging.testTask(id)?.value
        let result = try await sim.messaging("GET", "performanceTest/result/\(id)").decode(RetentionWire.PerformanceTestResult.self)
        #expect(result.result == "FAIL" && result.successRate == 0 && result.numPending == 0)
        #expect(result.failures == ["TIMED_OUT": 10])
        let times = try #require(result.responseTimes)
        #expect(times.p50 >= 150 && times.average >= 150)
        #expect(try await sim.messaging("PUT", "realtime/url", json: ["realtimeURL": receiver.url]).errorCode == 4_030_026)
    }
}
