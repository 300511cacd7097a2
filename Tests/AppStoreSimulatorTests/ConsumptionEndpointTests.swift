import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Send Consumption Information (`PUT /inApps/v2/transactions/consumption/{id}`) and the
/// notifications of refund requests, over HTTP.
@Suite struct ConsumptionEndpointTests {
    static let day = SimTime.day, hour = SimTime.hour

    @Test("each bad body, id or token gets Apple's answer; a good one 202 with no body; stats count them; only 202s are recorded")
    func validation() async throws {
        let sim = try await SimHarness.start(subscribers: 200)
        defer { Task { try? await sim.stop() } }
        let i = try #require(sim.productionSubscribers.first { sim.population.refundRequests($0).isEmpty })
        let tid = sim.population.originalTransactionId(i)
        func code(_ body: [String: Any]? = nil, raw: String? = nil) async throws -> (Int, Int64?) {
            let r = try await sim.sendConsumption(tid, body ?? [:], raw: raw.map { Data($0.utf8) })
            return (r.status, (try? r.decode(ErrorPayload.self))?.errorCode)
        }
        func with(_ changes: [String: Any?]) -> [String: Any] {
            var b = consumptionBody()
            for (k, v) in changes { b[k] = v }
            return b
        }
        #expect(try await code(raw: "[1, 2]") == (400, 4_000_000))
        #expect(try await code(raw: "not json") == (400, 4_000_000))
        #expect(try await code(raw: "") == (400, 4_000_000))
        for consented: Any? in [nil, false, "true", 1] {
            #expect(try await code(with(["customerConsented": consented])) == (400, 4_000_035), "\(String(describing: consented))")
        }
        for sample: Any? in [nil, "false", 0] {
            #expect(try await code(with(["sampleContentProvided": sample])) == (400, 4_000_041), "\(String(describing: sample))")
        }
        for delivery: Any? in [nil, "SHIPPED", 1] {
            #expect(try await code(with(["deliveryStatus": delivery])) == (400, 4_000_036), "\(String(describing: delivery))")
        }
        for bad: [String: Any?] in [
            ["consumptionPercentage": 100_001], ["consumptionPercentage": -1], ["consumptionPercentage": "50"],
            ["consumptionPercentage": 50.5], ["consumptionPercentage": 40_000, "deliveryStatus": "UNDELIVERED_OTHER"],
            ["consumptionPercentage": 40_000, "refundPreference": "GRANT_PRORATED"], ["consumptionPercentage": 0, "refundPreference": "GRANT_PRORATED"],
            ["refundPreference": "MAYBE"], ["refundPreference": true],
        ] {
            #expect(try await code(with(bad)) == (400, 4_000_000), "\(bad)")
        }
        let good: [[String: Any?]] = [
            [:], ["consumptionPercentage": 100_000, "refundPreference": "DECLINE"],
            ["consumptionPercentage": 0, "deliveryStatus": "UNDELIVERED_SERVER_OUTAGE", "refundPreference": "GRANT_FULL"],
            ["refundPreference": "GRANT_PRORATED", "sampleContentProvided": true], ["consumptionPercentage": NSNull()],
        ]
        for changes in good {
            let r = try await sim.sendConsumption(tid, with(changes))
            #expect(r.status == 202 && r.body.isEmpty, "\(changes): \(r.status) \(r.text)")
        }
        // Ids: malformed, unknown, of the other environment, not yet purchased; no token; not PUT.
        #expect(try await sim.sendConsumption("12ab", consumptionBody()).status == 400)
        let unknown = try await sim.sendConsumption(sim.population.transactionId(i, 999), consumptionBody())
        #expect(try unknown.status == 404 && unknown.decode(ErrorPayload.self).errorCode == 4_040_010)
        #expect(try await sim.sendConsumption(tid, consumptionBody(), sandbox: true).status == 404)
        #expect(try await sim.sendConsumption(tid, consumptionBody(), auth: "").status == 401)
        #expect(try await sim.sendConsumption(tid, method: "GET").status == 404)

        let stats = try #require(try await sim.get("/_sim/stats", token: "").json as? [String: Any])
        let counts = try #require((stats["requests"] as? [String: Any])?["consumption"] as? [String: Int])
        #expect(counts["202"] == good.count && counts["401"] == 1 && counts["404"] == 3)
        #expect(counts["400"] == 3 + 4 + 3 + 3 + 9 + 1)
        // No open request for this transaction: every accepted answer is unrequested, with its body.
        let truth = try await sim.consumptionTruth()
        let unrequested = try #require(truth["unrequested_answers"] as? [[String: Any]])
        #expect(unrequested.count == good.count)
        #expect(unrequested.allSatisfy { $0["transaction_id"] as? String == tid && $0["received_at"] as? String == SimTime.format(sim.now) })
        let second = try #require(unrequested[1]["body"] as? [String: Any])
        #expect(second["consumptionPercentage"] as? Int == 100_000 && second["refundPreference"] as? String == "DECLINE")
        #expect(second["customerConsented"] as? Bool == true && second["deliveryStatus"] as? String == "DELIVERED")
        #expect((unrequested[0]["body"] as? [String: Any])?["refundPreference"] == nil)
    }

    @Test("the PUT has its own rate-limit bucket per environment and gets the request faults of every /inApps endpoint")
    func limitsAndFaults() async throws {
        var options = SimulatorOptions()
        options.rate = 0.01
        options.burst = 1
        let sim = try await SimHarness.start(subscribers: 100, options: options)
        defer { Task { try? await sim.stop() } }
        let tid = sim.population.originalTransactionId(sim.productionSubscribers[0])
        #expect(try await sim.sendConsumption(tid, consumptionBody()).status == 202)
        let limited = try await sim.sendConsumption(tid, consumptionBody())
        #expect(try limited.status == 429 && limited.decode(ErrorPayload.self).errorCode == 4_290_000)
        #expect(limited.headers["retry-after"] != nil)
        // The status endpoint's bucket is untouched.
        #expect(try await sim.get("/inApps/v1/subscriptions/\(tid)").status == 200)

        var failing = SimulatorOptions()
        failing.errorRate = 1
        let broken = try await SimHarness.start(subscribers: 50, options: failing)
        defer { Task { try? await broken.stop() } }
        let r = try await broken.sendConsumption(broken.population.originalTransactionId(broken.productionSubscribers[0]), consumptionBody())
        #expect(try r.status == 500 && r.decode(ErrorPayload.self).errorCode == 5_000_001)
        #expect((try await broken.consumptionTruth()["unrequested_answers"] as? [Any])?.isEmpty == true, "a failed PUT records nothing")
    }

    @Test("a refund request is notified with its reason and a verifiable transaction, and agrees with /_sim/events and /_sim/notifications")
    func requestNotification() async throws {
        let sim = try await SimHarness.start(subscribers: 1500, configure: { $0.refundDeclinedRate = 0.05 })
        defer { Task { try? await sim.stop() } }
        let verifier = try TestJWSVerifier(rootDER: sim.identity.chain.rootDER)
        for decision in [TimelineEvent.Kind.refund, .refundDeclined] {
            let r = try #require(sim.refundRequests(decision: decision, after: sim.now).first)
            let i = r.subscriber
            try await sim.setClock(r.decisionTime + Self.hour)
            let items = try await sim.allNotifications([
                "startDate": r.time, "endDate": sim.now, "transactionId": sim.population.originalTransactionId(i),
            ]).items
            let decoded = try items.map { try payload($0.signedPayload, as: RequestNotification.self) }
            let k = try #require(decoded.firstIndex { $0.notificationType == "CONSUMPTION_REQUEST" }, "\(decoded.map(\.notificationType))")
            let request = decoded[k]
            #expect(request.subtype == nil && request.signedDate == r.time)
            #expect(request.data.consumptionRequestReason == r.reason.apple)
            #expect(request.notificationUUID == sim.population.notificationUUID(i, r.eventIndex))
            _ = try await verifier.verify(items[k].signedPayload)
            let txBytes = try await verifier.verify(request.data.signedTransactionInfo)
            let tx = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: Data(txBytes))
            #expect(tx.transactionId == sim.population.transactionId(i, r.transactionIndex) && tx.revocationDate == nil)
            #expect(request.data.status == 1)
            // Apple's decision: REFUND (revoked) or REFUND_DECLINED (not revoked, nothing else changes).
            let decisionType = decision == .refund ? "REFUND" : "REFUND_DECLINED"
            let outcome = try #require(decoded.first { $0.notificationType == decisionType })
            #expect(outcome.signedDate == r.decisionTime && outcome.data.consumptionRequestReason == nil)
            let decided = try payload(outcome.data.signedTransactionInfo, as: JWSTransactionDecodedPayload.self)
            #expect(decided.transactionId == tx.transactionId && (decided.revocationDate != nil) == (decision == .refund))
            #expect(outcome.data.status == (decision == .refund ? 5 : 1))

            let events = try await sim.truthEvents(from: r.time, to: r.decisionTime + 1)
                .filter { $0["original_transaction_id"] as? String == sim.population.originalTransactionId(i) }
            let asked = try #require(events.first { $0["event"] as? String == "refund_requested" })
            let details = asked["details"] as? [String: Any] ?? [:]
            #expect(details["reason"] as? String == r.reason.apple && details["transaction_id"] as? String == tx.transactionId)
            #expect(details["deadline"] as? String == SimTime.format(r.deadline) && asked["notification_uuid"] as? String == request.notificationUUID)
            #expect(events.contains { $0["event"] as? String == (decision == .refund ? "refunded" : "refund_declined") })
            let notes = try await sim.notificationTruth(from: r.time, to: r.time + 1)
            #expect(notes.contains { $0["notification_uuid"] as? String == request.notificationUUID && $0["notification_type"] as? String == "CONSUMPTION_REQUEST" })
            let truth = try await sim.consumptionTruth(of: r)
            #expect(truth["notification_uuid"] as? String == request.notificationUUID && truth["notified"] as? Bool == true)
            #expect(truth["decision"] as? String == decisionType && truth["decided_at"] as? String == SimTime.format(r.decisionTime))
            #expect(truth["reason"] as? String == r.reason.apple && truth["transaction_id"] as? String == tx.transactionId)
        }
        // The history's type filter knows both types.
        let only = try await sim.allNotifications(["startDate": sim.now - 30 * Self.day, "endDate": sim.now, "notificationType": "CONSUMPTION_REQUEST"]).items
        #expect(!only.isEmpty)
        #expect(try only.allSatisfy { try payload($0.signedPayload, as: RequestNotification.self).notificationType == "CONSUMPTION_REQUEST" })
    }
}

/// A notification with `data.consumptionRequestReason`.
struct RequestNotification: Decodable {
    struct Data: Decodable {
        var signedTransactionInfo: String
        var status: Int32
        var consumptionRequestReason: String?
    }

    var notificationType: String
    var subtype: String?
    var notificationUUID: String
    var signedDate: Int64
    var data: Data
}
