import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct ClockAndControlTests {
    @Test func clockMovesOnlyThroughTheAPI() async throws {
        let sim = try await SimHarness.start(subscribers: 200)
        defer { Task { try? await sim.stop() } }
        var r = try await sim.get("/_sim/clock", token: "")
        #expect(r.status == 200)
        #expect(r.text == #"{"now":"2026-01-01T00:00:00Z"}"#)
        r = try await sim.post("/_sim/clock?advance=1d")
        #expect(r.text == #"{"now":"2026-01-02T00:00:00Z"}"#)
        r = try await sim.post("/_sim/clock?advance=36h")
        #expect(r.text == #"{"now":"2026-01-03T12:00:00Z"}"#)
        r = try await sim.post("/_sim/clock?set=2026-03-01T08:30:00Z")
        #expect(r.text == #"{"now":"2026-03-01T08:30:00Z"}"#)
        r = try await sim.get("/_sim/clock", token: "")
        #expect(r.text == #"{"now":"2026-03-01T08:30:00Z"}"#)
        #expect(try await sim.post("/_sim/clock?advance=soon").status == 400)
        #expect(try await sim.post("/_sim/clock?set=yesterday").status == 400)
        #expect(try await sim.post("/_sim/clock").status == 400)
    }

    @Test func signedDateFollowsTheClock() async throws {
        let sim = try await SimHarness.start(subscribers: 200)
        defer { Task { try? await sim.stop() } }
        let otid = sim.population.originalTransactionId(sim.productionSubscribers[0])
        let a = try await sim.get("/inApps/v1/subscriptions/\(otid)").decode(StatusResponseShim.self)
        _ = try await sim.post("/_sim/clock?advance=2d")
        let b = try await sim.get("/inApps/v1/subscriptions/\(otid)").decode(StatusResponseShim.self)
        let ta = try payload(a.data[0].lastTransactions[0].signedRenewalInfo, as: SignedDateShim.self)
        let tb = try payload(b.data[0].lastTransactions[0].signedRenewalInfo, as: SignedDateShim.self)
        #expect(ta.signedDate == PopulationConfig.defaultStart)
        #expect(tb.signedDate == PopulationConfig.defaultStart + 2 * SimTime.day)
    }

    @Test func statsCountRequestsByEndpointAndStatus() async throws {
        let sim = try await SimHarness.start(subscribers: 200)
        defer { Task { try? await sim.stop() } }
        let otid = sim.population.originalTransactionId(sim.productionSubscribers[0])
        _ = try await sim.get("/inApps/v1/subscriptions/\(otid)")
        _ = try await sim.get("/inApps/v1/subscriptions/\(otid)")
        _ = try await sim.get("/inApps/v1/subscriptions/\(otid)", token: "")
        let stats = try #require(try await sim.get("/_sim/stats", token: "").json as? [String: Any])
        let requests = try #require(stats["requests"] as? [String: [String: Int]])
        #expect(requests["subscriptions"]?["200"] == 2)
        #expect(requests["subscriptions"]?["401"] == 1)
        #expect((stats["cache_hits"] as? Int ?? 0) >= 1)
        #expect((stats["auth_rejections"] as? [String: Int])?["missing"] == 1)
    }
}

struct StatusResponseShim: Decodable {
    struct Group: Decodable {
        var subscriptionGroupIdentifier: String
        var lastTransactions: [Item]
    }
    struct Item: Decodable {
        var status: Int32
        var originalTransactionId: String
        var signedTransactionInfo: String
        var signedRenewalInfo: String
    }
    var environment: String
    var bundleId: String
    var appAppleId: Int64
    var data: [Group]
}

struct SignedDateShim: Decodable { var signedDate: Int64 }
