import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Several apps under one team key (docs/simulator.md, "Several apps"): the token's `bid` picks
/// the app a request reads; limits, notification history, answers and truth are per app.
@Suite struct MultiAppTests {
    static let day = SimTime.day

    @Test func theTokensBidPicksTheApp() async throws {
        let sim = try await SimHarness.start(subscribers: 300, apps: 2)
        defer { Task { try? await sim.stop() } }
        for (own, other) in [(1, 2), (2, 1)] {
            let app = sim.app(own), token = try sim.token(app: own)
            let mine = app.population.originalTransactionId(sim.productionSubscribers(app: own)[0])
            let r = try await sim.get("/inApps/v1/subscriptions/\(mine)", token: token)
            #expect(r.status == 200)
            let body = try r.decode(StatusResponseShim.self)
            #expect(body.bundleId == app.bundleId)
            #expect(body.appAppleId == app.population.config.appAppleId)
            let tx = try payload(body.data[0].lastTransactions[0].signedTransactionInfo, as: JWSTransactionDecodedPayload.self)
            #expect(tx.bundleId == app.bundleId)
            #expect(tx.originalTransactionId == mine)
            // Another app's id is unknown to this token, exactly like an id nobody has.
            let theirs = sim.app(other).population.originalTransactionId(sim.productionSubscribers(app: other)[0])
            for path in ["/inApps/v1/subscriptions/", "/inApps/v2/history/", "/inApps/v1/transactions/", "/inApps/v2/refund/lookup/"] {
                let r = try await sim.get(path + theirs, token: token)
                #expect(r.status == 404, "\(path)")
                #expect(try r.decode(ErrorPayload.self).errorCode == 4_040_010, "\(path)")
            }
            let notifications = try await sim.notificationHistory(
                ["startDate": sim.now - Self.day, "endDate": sim.now, "transactionId": theirs], auth: token)
            #expect(notifications.status == 404)
            #expect(try notifications.decode(ErrorPayload.self).errorCode == 4_040_010)
        }
        let mine = sim.population.originalTransactionId(sim.productionSubscribers[0])
        #expect(try await sim.get("/inApps/v1/subscriptions/\(mine)", token: sim.token(bundleId: "com.example.churnwatch.app3")).status == 401)
    }

    @Test func rateLimitsArePerApp() async throws {
        var options = SimulatorOptions()
        // One token per 100 s: the buckets cannot refill during the test.
        options.rate = 0.01
        options.burst = 2
        let sim = try await SimHarness.start(subscribers: 100, options: options, apps: 2)
        defer { Task { try? await sim.stop() } }
        func path(_ k: Int) -> String {
            "/inApps/v1/subscriptions/\(sim.app(k).population.originalTransactionId(sim.productionSubscribers(app: k)[0]))"
        }
        let t1 = try sim.token(app: 1), t2 = try sim.token(app: 2)
        #expect(try await sim.get(path(1), token: t1).status == 200)
        #expect(try await sim.get(path(1), token: t1).status == 200)
        #expect(try await sim.get(path(1), token: t1).status == 429)
        // App 1's empty bucket does not throttle app 2.
        #expect(try await sim.get(path(2), token: t2).status == 200)
        #expect(try await sim.get(path(2), token: t2).status == 200)
        #expect(try await sim.get(path(2), token: t2).status == 429)
        for k in 1...2 {
            let stats = try #require(try await sim.get("/_sim/stats?bundle_id=\(sim.app(k).bundleId)", token: "").json as? [String: Any])
            #expect(stats["rate_limited"] as? Int == 1)
            #expect((stats["requests"] as? [String: [String: Int]])?["subscriptions"]?["200"] == 2)
        }
    }

    @Test func notificationHistoriesAreSeparate() async throws {
        let sim = try await SimHarness.start(subscribers: 400, apps: 2)
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=10d")
        let from = sim.now - 12 * Self.day
        var seen: [Set<String>] = []
        for k in 1...2 {
            let app = sim.app(k)
            let items = try await sim.allNotifications(["startDate": from, "endDate": sim.now], auth: sim.token(app: k)).items
            let decoded = try items.map { try payload($0.signedPayload, as: DecodedNotification.self) }
            #expect(!decoded.isEmpty)
            #expect(decoded.allSatisfy { $0.data.bundleId == app.bundleId && $0.data.appAppleId == app.population.config.appAppleId })
            // Exactly the app's notified Production changes of the window, in the same order.
            let truth = try await sim.get(
                "/_sim/notifications?bundle_id=\(app.bundleId)&from=\(SimTime.format(from))&to=\(SimTime.format(sim.now + 1))",
                token: "")
            let entries = try #require((truth.json as? [String: Any])?["notifications"] as? [[String: Any]])
            let expected = entries.filter { $0["environment"] as? String == "Production" && $0["notified"] as? Bool == true }
            #expect(decoded.map(\.notificationUUID) == expected.compactMap { $0["notification_uuid"] as? String })
            seen.append(Set(decoded.map(\.notificationUUID)))
        }
        #expect(seen[0].isDisjoint(with: seen[1]))
    }

    @Test func simEndpointsTakeABundleId() async throws {
        let sim = try await SimHarness.start(subscribers: 200, apps: 2)
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=20d")
        let (one, two) = (sim.app(1), sim.app(2))
        func ids(_ r: SimHarness.Response, _ key: String) -> Set<String> {
            Set(((r.json as? [String: Any])?[key] as? [[String: Any]] ?? []).compactMap { $0["original_transaction_id"] as? String })
        }
        func allIds(_ app: SimApp) -> Set<String> { Set((0..<app.population.count).map(app.population.originalTransactionId)) }
        let truth1 = try await sim.get("/_sim/truth", token: "")
        let truth2 = try await sim.get("/_sim/truth?bundle_id=\(two.bundleId)", token: "")
        #expect(ids(truth1, "subscriptions") == allIds(one))
        #expect(ids(truth2, "subscriptions") == allIds(two))
        #expect(try await sim.get("/_sim/truth?bundle_id=\(one.bundleId)", token: "").body == truth1.body)
        for path in ["/_sim/events", "/_sim/notifications"] {
            let r = try await sim.get("\(path)?bundle_id=\(two.bundleId)", token: "")
            let key = path == "/_sim/events" ? "events" : "notifications"
            #expect(!ids(r, key).isEmpty && ids(r, key).isSubset(of: allIds(two)), "\(path)")
        }
        // An unknown bundle id: a 400 with one clear line.
        let unknown = try await sim.get("/_sim/truth?bundle_id=com.example.nobody", token: "")
        #expect(unknown.status == 400)
        #expect(!unknown.text.contains("\n"))
        let message = try #require((unknown.json as? [String: Any])?["error"] as? String)
        #expect(message.hasPrefix("unknown bundle_id com.example.nobody"))
        #expect(message.contains(two.bundleId))
        // POST bodies: the query parameter, or the field of a JSON object.
        let otid2 = two.population.originalTransactionId(0)
        let at = try JSONSerialization.data(withJSONObject: [["original_transaction_id": otid2, "at": SimTime.format(sim.now)]])
        #expect(try await sim.post("/_sim/truth/at?bundle_id=\(two.bundleId)", body: at).status == 200)
        #expect(try await sim.post("/_sim/truth/at", body: at).status == 400, "not one of the first app's ids")
        let redeem = Data(" \n".utf8) + (try JSONSerialization.data(withJSONObject: ["original_transaction_id": otid2, "bundle_id": two.bundleId]))
        #expect(try await sim.post("/_sim/offers/redeem", body: redeem).status == 200)
        #expect(ids(try await sim.get("/_sim/offers?bundle_id=\(two.bundleId)", token: ""), "redemptions") == [otid2])
        #expect(ids(try await sim.get("/_sim/offers", token: ""), "redemptions").isEmpty)
        #expect(try await sim.get("/_sim/truth/consumption?bundle_id=\(two.bundleId)", token: "").status == 200)
        // /_sim/info: the first app's fields as before, and every app.
        let info = try #require(try await sim.get("/_sim/info", token: "").json as? [String: Any])
        #expect(info["bundle_id"] as? String == one.bundleId && info["subscribers"] as? Int == 200)
        let apps = try #require(info["apps"] as? [[String: Any]])
        #expect(apps.map { $0["bundle_id"] as? String } == [one.bundleId, two.bundleId])
        #expect(apps.map { ($0["app_apple_id"] as? NSNumber)?.int64Value } == [1_234_567_890, 1_234_567_891])
        #expect(apps.map { $0["subscribers"] as? Int } == [200, 200])
    }

    @Test func consumptionAnswersBelongToTheirApp() async throws {
        let sim = try await SimHarness.start(subscribers: 200, apps: 2)
        defer { Task { try? await sim.stop() } }
        let two = sim.app(2)
        let otid2 = two.population.originalTransactionId(sim.productionSubscribers(app: 2)[0])
        let wrong = try await sim.sendConsumption(otid2, consumptionBody(), auth: sim.token(app: 1))
        #expect(wrong.status == 404)
        #expect(try wrong.decode(ErrorPayload.self).errorCode == 4_040_010)
        #expect(try await sim.sendConsumption(otid2, consumptionBody(), auth: sim.token(app: 2)).status == 202)
        func unrequested(_ query: String) async throws -> [[String: Any]] {
            let r = try await sim.get("/_sim/truth/consumption\(query)", token: "")
            return (r.json as? [String: Any])?["unrequested_answers"] as? [[String: Any]] ?? []
        }
        #expect(try await unrequested("?bundle_id=\(two.bundleId)").map { $0["original_transaction_id"] as? String } == [otid2])
        #expect(try await unrequested("").isEmpty)
    }

    @Test func verifyReceiptFindsTheReceiptsApp() async throws {
        let sim = try await SimHarness.start(subscribers: 300, apps: 2) { $0.receiptShare = 0.3 }
        defer { Task { try? await sim.stop() } }
        for k in 1...2 {
            let pop = sim.app(k).population
            let i = try #require(sim.productionSubscribers(app: k).first { pop.receiptData($0) != nil })
            let body = try JSONEncoder().encode(VerifyReceiptRequest(receiptData: pop.receiptData(i)!, password: sim.identity.sharedSecret))
            let v = try await sim.post("/verifyReceipt", body: body).decode(VerifyReceiptResponse.self)
            #expect(v.status == 0)
            #expect(v.receipt?.bundleId == pop.config.bundleId)
            #expect(v.latestReceiptInfo?.contains { $0.originalTransactionId == pop.originalTransactionId(i) } == true)
        }
    }
}

extension SimHarness {
    /// A fresh valid token naming app `k`.
    func token(app k: Int) throws -> String { try token(bundleId: app(k).bundleId) }

    /// Production subscribers (index) of app `k`.
    func productionSubscribers(app k: Int) -> [Int] {
        let p = app(k).population
        return (0..<p.count).filter { !p.isSandbox($0) }
    }
}
