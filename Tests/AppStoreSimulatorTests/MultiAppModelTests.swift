import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Several apps: each app's own subscribers and ids.
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
}
