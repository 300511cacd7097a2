import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Several apps: each app's own subscribers and ids, the first app unchanged.
@Suite struct MultiAppModelTests {
    static let start = PopulationConfig.defaultStart

    /// Every id a population hands out up to its horizon: transactions, web order line items,
    /// app transactions.
    static func allIds(_ p: Population) -> Set<String> {
        let end = start + Int64(p.config.horizonDays) * SimTime.day
        var ids = Set<String>()
        for i in 0..<p.count {
            ids.insert(p.appTransactionId(i))
            for k in 0..<p.state(i, at: end).transactionCount {
                ids.insert(p.transactionId(i, k))
                ids.insert(p.webOrderLineItemId(i, k))
            }
        }
        return ids
    }

    @Test func eachAppHasItsOwnSubscribersAndIds() {
        let base = PopulationConfig(subscribers: 1500, seed: 7, start: Self.start)
        let apps = (1...3).map { Population(config: base.forApp($0)) }
        #expect(apps[0].config == base)
        #expect(apps.map(\.config.bundleId) == ["com.example.churnwatch", "com.example.churnwatch.app2", "com.example.churnwatch.app3"])
        #expect(apps.map(\.config.appAppleId) == [1_234_567_890, 1_234_567_891, 1_234_567_892])
        #expect(Set(apps.map(\.config.seed)).count == 3)
        #expect(apps.allSatisfy { $0.count == 1500 })
        // Their own subscribers: other timelines, other notification UUIDs.
        #expect(Set(apps.map { GoldenDigest.timelines($0) }).count == 3)
        let uuids = apps.map { p in Set((0..<p.count).map { p.notificationUUID($0, 0) }) }
        #expect(uuids[0].isDisjoint(with: uuids[1]) && uuids[0].isDisjoint(with: uuids[2]) && uuids[1].isDisjoint(with: uuids[2]))
        // Ids never meet, and an app does not know another's.
        let ids = apps.map(Self.allIds)
        #expect(ids[0].isDisjoint(with: ids[1]) && ids[0].isDisjoint(with: ids[2]) && ids[1].isDisjoint(with: ids[2]))
        for (a, b) in [(0, 1), (1, 0), (1, 2), (2, 0)] {
            let last = apps[b].count - 1
            #expect(apps[a].locate(transactionId: apps[b].originalTransactionId(0)) == nil)
            #expect(apps[a].locate(transactionId: apps[b].transactionId(last, 5)) == nil)
        }
        #expect(apps[1].locate(transactionId: apps[1].transactionId(1499, 3)).map { [$0.subscriber, $0.transaction] } == [1499, 3])
        #expect(apps[1].originalTransactionId(0) == "200100000000000")
        // The largest population (10 million) stays inside its app's range.
        #expect(Int64(10_000_000) * 1000 <= Population.appIdStride)
    }

    @Test func theFirstAppIsTheOneAppSimulator() async throws {
        let single = try await SimHarness.start(subscribers: 600, seed: 11)
        defer { Task { try? await single.stop() } }
        let multi = try await SimHarness.start(subscribers: 600, seed: 11, apps: 2)
        defer { Task { try? await multi.stop() } }
        let (p1, p2) = (single.population, multi.population)
        #expect(GoldenDigest.timelines(p1) == GoldenDigest.timelines(p2))
        #expect(GoldenDigest.truth(p1) == GoldenDigest.truth(p2))
        #expect(GoldenDigest.events(p1) == GoldenDigest.events(p2))
        #expect(GoldenDigest.notifications(p1) == GoldenDigest.notifications(p2))
        #expect(ClientFiles.csv(p1) == ClientFiles.csv(p2))
        for sim in [single, multi] { _ = try await sim.post("/_sim/clock?advance=40d") }
        for path in ["/_sim/truth", "/_sim/events", "/_sim/notifications", "/_sim/truth/consumption"] {
            let a = try await single.get(path, token: ""), b = try await multi.get(path, token: "")
            #expect(a.status == 200 && a.body == b.body, "\(path)")
        }
        // The served payloads (all but the signatures, which ES256 randomizes).
        for i in single.productionSubscribers.prefix(40) {
            let otid = p1.originalTransactionId(i)
            for path in ["/inApps/v1/subscriptions/", "/inApps/v2/history/"] {
                let a = try await single.get(path + otid), b = try await multi.get(path + otid)
                let same = a.status == b.status && Self.payloadsOnly(a.text) == Self.payloadsOnly(b.text)
                #expect(same, "\(path)\(otid)")
                #expect(Self.payloadsOnly(a.text).contains(".-\""), "JWS found in \(path)\(otid)")
            }
        }
    }

    /// A body with each JWS's header and signature blanked (two simulators have two PKIs, and
    /// ES256 signatures are randomized).
    static func payloadsOnly(_ text: String) -> String {
        text.split(separator: "\"", omittingEmptySubsequences: false).map { part -> String in
            let segments = part.split(separator: ".", omittingEmptySubsequences: false)
            guard segments.count == 3, segments.allSatisfy({ $0.count > 40 }) else { return String(part) }
            return "-.\(segments[1]).-"
        }.joined(separator: "\"")
    }
}
