import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Several apps: each app's own subscribers and ids, the first app unchanged, the files.
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

    @Test func filesForEveryApp() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appstore-sim-files-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try SimulatorIdentity.loadOrCreate(dir: dir.path)
        let base = PopulationConfig(subscribers: 80, seed: 7, start: Self.start)
        let pops = (1...2).map { Population(config: base.forApp($0)) }
        func read(_ name: String) throws -> String { try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8) }
        try ClientFiles.write(
            dir: dir.path, identity: identity, population: pops[0], productionPort: 9980, sandboxPort: 9981, environment: .production)
        let (env1, csv1) = (try read("churnwatch.env"), try read("subscriptions.csv"))
        try ClientFiles.write(
            dir: dir.path, identity: identity, populations: pops, productionPort: 9980, sandboxPort: 9981, environment: .production)
        // The first app's files are a one-app simulator's.
        #expect(try read("churnwatch.env") == env1)
        #expect(try read("subscriptions.csv") == csv1)
        let bid = "com.example.churnwatch.app2"
        let env2 = try read("churnwatch-\(bid).env")
        #expect(env2.contains("APPSTORE_BUNDLE_ID=\(bid)\n") && env2.contains("APPSTORE_APP_APPLE_ID=1234567891\n"))
        // Same key, hosts and chain: only the app's two lines differ.
        let differing = zip(env1.split(separator: "\n"), env2.split(separator: "\n")).filter { $0 != $1 }.map(\.1)
        #expect(differing == ["APPSTORE_BUNDLE_ID=\(bid)", "APPSTORE_APP_APPLE_ID=1234567891"])
        let rows = try read("subscriptions-\(bid).csv").split(separator: "\n").dropFirst()
        #expect(rows.map { String($0.prefix { $0 != "," }) } == (0..<80).map(pops[1].originalTransactionId))
        #expect(try read("apps.tsv") == """
            com.example.churnwatch\t1234567890\tchurnwatch.env\tsubscriptions.csv
            \(bid)\t1234567891\tchurnwatch-\(bid).env\tsubscriptions-\(bid).csv

            """)
        let listed = try #require(ClientFiles.apps(dir: dir.path))
        #expect(listed.map(\.bundleId) == ["com.example.churnwatch", bid])
        // A token naming app 2 (as `appstore-sim token --app 2` mints from apps.tsv) is app 2's.
        let now = Int64(Date().timeIntervalSince1970)
        let token = try APITokenVerifier.makeToken(
            key: identity.apiKey, keyId: identity.keyId, issuerId: identity.issuerId, bundleId: listed[1].bundleId,
            issuedAt: now, expiresAt: now + 300)
        let verifier = APITokenVerifier(
            issuerId: identity.issuerId, keyId: identity.keyId, bundleIds: pops.map(\.config.bundleId),
            publicKey: identity.apiKey.publicKey)
        #expect(try verifier.verifyToken(authorization: "Bearer \(token)", now: now).app == 1)
    }
}
