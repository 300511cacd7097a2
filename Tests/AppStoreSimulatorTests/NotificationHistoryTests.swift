import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Get Notification History: paging, errors, filters and dates (docs/apple-api.md, "Notifications V2").
@Suite struct NotificationHistoryTests {
    static let day = SimTime.day

    @Test func pagesThroughTheWindowInSignedDateOrderWithTokens() async throws {
        let sim = try await SimHarness.start(subscribers: 1500)
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=12d")
        let start = sim.now - 14 * Self.day
        let body: [String: Any] = ["startDate": start, "endDate": sim.now + 5 * Self.day]
        var uuids: [String] = []
        var token: String?
        var previous = Int64.min
        var pages = 0
        while true {
            let page = try await sim.notificationHistory(body, token: token).decode(HistoryPage.self)
            pages += 1
            #expect(page.notificationHistory.count <= 20)
            #expect(page.notificationHistory.count == 20 || !page.hasMore)
            for item in page.notificationHistory {
                let n = try payload(item.signedPayload, as: DecodedNotification.self)
                #expect(n.signedDate >= previous && n.signedDate >= start && n.signedDate <= sim.now)
                #expect(n.data.environment == "Production" && n.version == "2.0")
                previous = n.signedDate
                uuids.append(n.notificationUUID)
            }
            guard page.hasMore else { break }
            #expect(page.paginationToken != nil)
            token = page.paginationToken
        }
        #expect(pages > 5, "a window of two weeks spans many pages")
        #expect(Set(uuids).count == uuids.count, "no notification twice across pages")
        // Exactly the notified Production changes of the window (the future end is treated as now).
        let truth = try await sim.notificationTruth(from: start, to: sim.now + 1)
        let expected = truth.filter { $0["environment"] as? String == "Production" && $0["notified"] as? Bool == true }
        #expect(uuids == expected.map { $0["notification_uuid"] as! String })
        // A token is valid only with the body it was issued for.
        let first = try await sim.notificationHistory(body).decode(HistoryPage.self)
        let other = try await sim.notificationHistory(["startDate": start + 1, "endDate": sim.now], token: first.paginationToken)
        #expect(other.status == 400)
        #expect(other.text.contains("4000014"))
    }

    @Test func answersEachBadRequestWithApplesError() async throws {
        let sim = try await SimHarness.start(subscribers: 400)
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=2d")
        let now = sim.now, s = now - Self.day
        func code(_ body: [String: Any], token: String? = nil, sandbox: Bool = false, raw: Data? = nil) async throws -> Int64? {
            let r = try await sim.notificationHistory(body, token: token, sandbox: sandbox, raw: raw)
            return (r.json as? [String: Any])?["errorCode"] as? Int64
        }
        #expect(try await code(["startDate": now - 181 * Self.day, "endDate": now]) == 4_000_012)
        #expect(try await sim.notificationHistory(["startDate": now - 179 * Self.day, "endDate": now]).status == 200)
        #expect(try await code(["startDate": now - 31 * Self.day, "endDate": now], sandbox: true) == 4_000_012)
        #expect(try await sim.notificationHistory(["startDate": now - 29 * Self.day, "endDate": now], sandbox: true).status == 200)
        #expect(try await code(["startDate": s, "endDate": s]) == 4_000_013)
        #expect(try await code(["startDate": now, "endDate": s]) == 4_000_013)
        #expect(try await code(["startDate": s, "endDate": now], token: "bm9wZQ") == 4_000_014)
        #expect(try await code(["startDate": s, "endDate": now], token: "%%%") == 4_000_014)
        #expect(try await code(["endDate": now]) == 4_000_015)
        #expect(try await code(["startDate": "yesterday", "endDate": now]) == 4_000_015)
        #expect(try await code(["startDate": s]) == 4_000_016)
        #expect(try await code(["startDate": s, "endDate": now, "notificationType": "NOT_A_TYPE"]) == 4_000_018)
        #expect(try await code(["startDate": s, "endDate": now, "notificationSubtype": "VOLUNTARY"]) == 4_000_018)
        #expect(try await code(["startDate": s, "endDate": now, "notificationType": "DID_RENEW", "notificationSubtype": "VOLUNTARY"]) == 4_000_018)
        let id = sim.population.originalTransactionId(sim.productionSubscribers[0])
        #expect(try await code(["startDate": s, "endDate": now, "notificationType": "EXPIRED", "transactionId": id]) == 4_000_019)
        #expect(try await code(["startDate": s, "endDate": now, "transactionId": "12ab"]) == 4_000_006)
        #expect(try await code(["startDate": s, "endDate": now, "transactionId": "1"]) == 4_040_010)
        #expect(try await code([:], raw: Data("not json".utf8)) == 4_000_000)
        let r = try await sim.notificationHistory(["startDate": s, "endDate": now], auth: "")
        #expect(r.status == 401)
    }

    @Test func filtersByTypeSubtypeCustomerAndFailures() async throws {
        var options = SimulatorOptions()
        options.notifications.failedDeliveryShare = 0.2
        let sim = try await SimHarness.start(subscribers: 1500, options: options)
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=20d")
        let base: [String: Any] = ["startDate": sim.now - 30 * Self.day, "endDate": sim.now]
        let all = try await sim.allNotifications(base).items.map { try payload($0.signedPayload, as: DecodedNotification.self) }

        let renewals = try await sim.allNotifications(base.merging(["notificationType": "DID_RENEW"]) { $1 }).items
        let decoded = try renewals.map { try payload($0.signedPayload, as: DecodedNotification.self) }
        #expect(!decoded.isEmpty && decoded.allSatisfy { $0.notificationType == "DID_RENEW" })
        #expect(decoded.count == all.filter { $0.notificationType == "DID_RENEW" }.count)

        let voluntary = try await sim.allNotifications(
            base.merging(["notificationType": "EXPIRED", "notificationSubtype": "VOLUNTARY"]) { $1 }).items
        let v = try voluntary.map { try payload($0.signedPayload, as: DecodedNotification.self) }
        #expect(!v.isEmpty && v.allSatisfy { $0.notificationType == "EXPIRED" && $0.subtype == "VOLUNTARY" })
        #expect(v.count == all.filter { $0.notificationType == "EXPIRED" && $0.subtype == "VOLUNTARY" }.count)

        // transactionId: the customer's subscriptions (both groups), any of its transaction ids.
        let pop = sim.population
        let pair = try #require(sim.productionSubscribers.first { i in
            pop.customerSubscriptions(i).count == 2 && all.contains { payloadOTID($0) == pop.originalTransactionId(i) }
        })
        let customer = Set(pop.customerSubscriptions(pair).map(pop.originalTransactionId))
        let mine = try await sim.allNotifications(base.merging(["transactionId": pop.transactionId(pair, 1)]) { $1 }).items
            .map { try payload($0.signedPayload, as: DecodedNotification.self) }
        #expect(!mine.isEmpty && mine.allSatisfy { customer.contains(payloadOTID($0)) })
        #expect(mine.count == all.filter { customer.contains(payloadOTID($0)) }.count)

        // onlyFailures: only notifications no attempt delivered.
        let everything = try await sim.allNotifications(base).items
        let failures = try await sim.allNotifications(base.merging(["onlyFailures": true]) { $1 }).items
        #expect(!failures.isEmpty && failures.count < everything.count / 5)
        #expect(failures.allSatisfy { !$0.sendAttempts.isEmpty && !$0.sendAttempts.contains { $0.sendAttemptResult == "SUCCESS" } })
        let retried = everything.filter { $0.sendAttempts.count > 1 }
        #expect(retried.contains { $0.sendAttempts.last?.sendAttemptResult == "SUCCESS" }, "some recover on Apple's retry")
        #expect(everything.allSatisfy { $0.sendAttempts.allSatisfy { $0.attemptDate <= sim.now } })
    }

    @Test func onlyNotificationsUpToTheClockAndInsideTheDates() async throws {
        let sim = try await SimHarness.start(subscribers: 1000)
        defer { Task { try? await sim.stop() } }
        let start = sim.now
        let body: [String: Any] = ["startDate": start, "endDate": start + 10 * Self.day]
        #expect(try await sim.allNotifications(body).items.isEmpty, "nothing has happened after the clock yet")
        _ = try await sim.post("/_sim/clock?advance=3d")
        let three = try await sim.allNotifications(body).items.map { try payload($0.signedPayload, as: DecodedNotification.self) }
        #expect(!three.isEmpty && three.allSatisfy { $0.signedDate >= start && $0.signedDate <= sim.now })
        _ = try await sim.post("/_sim/clock?advance=3d")
        let six = try await sim.allNotifications(body).items.map { try payload($0.signedPayload, as: DecodedNotification.self) }
        #expect(six.count > three.count)
        #expect(Array(six.prefix(three.count)).map(\.notificationUUID) == three.map(\.notificationUUID), "same records on rerun")
        // endDate is exclusive; notifications from before --start are there (Apple keeps 180 days).
        let cut = six[six.count / 2].signedDate
        let before = try await sim.allNotifications(["startDate": start, "endDate": cut]).items
        #expect(before.count == six.filter { $0.signedDate < cut }.count)
        let earlier = try await sim.allNotifications(["startDate": start - 2 * Self.day, "endDate": start]).items
        #expect(!earlier.isEmpty)
    }

    @Test func rateLimitAndFaultsApplyToTheEndpoint() async throws {
        var options = SimulatorOptions()
        options.rate = 0.001
        options.burst = 2
        let sim = try await SimHarness.start(subscribers: 200, options: options)
        defer { Task { try? await sim.stop() } }
        let body: [String: Any] = ["startDate": sim.now - Self.day, "endDate": sim.now]
        #expect(try await sim.notificationHistory(body).status == 200)
        #expect(try await sim.notificationHistory(body).status == 200)
        let limited = try await sim.notificationHistory(body)
        #expect(limited.status == 429 && limited.text.contains("4290000"))
        #expect(limited.headers["retry-after"] != nil)

        var failing = SimulatorOptions()
        failing.errorRate = 1
        let sim2 = try await SimHarness.start(subscribers: 100, options: failing)
        defer { Task { try? await sim2.stop() } }
        let r = try await sim2.notificationHistory(["startDate": sim2.now - Self.day, "endDate": sim2.now])
        #expect(r.status == 500 && r.text.contains("5000001"))
        let stats = try #require(try await sim2.get("/_sim/stats", token: "").json as? [String: Any])
        #expect(((stats["requests"] as? [String: Any])?["notification_history"] as? [String: Any])?["500"] as? Int == 1)
    }
}

func payloadOTID(_ n: DecodedNotification) -> String {
    (try? payload(n.data.signedTransactionInfo, as: JWSTransactionDecodedPayload.self).originalTransactionId) ?? ""
}
