import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// Answers to refund requests and Apple's decision (`--consumption-answer-effect`): over HTTP, the
/// truth, the status, the history and the feed agree; in the model, the draw and the rules.
@Suite struct ConsumptionDecisionTests {
    static let day = SimTime.day, hour = SimTime.hour, minute = SimTime.minute

    static func effect(_ p: Double) -> SimulatorOptions {
        var o = SimulatorOptions()
        o.consumptionAnswerEffect = p
        return o
    }

    /// Whether the refund deciding `r` ended the subscription (no reversal follows it).
    static func terminal(_ r: SimRefundRequest, _ p: Population) -> Bool {
        let tl = Array(p.timeline(r.subscriber))
        return !tl[(r.decisionIndex! + 1)...].contains { $0.kind == .refundReversed }
    }

    /// The notification types of subscription `i` from `from` to the clock, in order.
    static func history(_ sim: SimHarness, _ i: Int, from: Int64) async throws -> [(type: String, date: Int64)] {
        let items = try await sim.allNotifications([
            "startDate": from, "endDate": sim.now + 1, "transactionId": sim.population.originalTransactionId(i),
        ]).items
        return try items.map { try payload($0.signedPayload, as: RequestNotification.self) }.map { ($0.notificationType, $0.signedDate) }
    }

    /// Status (Get All Subscription Statuses) and revocation of subscription `i` at the clock.
    static func status(_ sim: SimHarness, _ i: Int) async throws -> (status: Int32, revoked: Bool, transactionId: String) {
        let otid = sim.population.originalTransactionId(i)
        let body = try await sim.get("/inApps/v1/subscriptions/\(otid)").decode(StatusResponse.self)
        let item = try #require((body.data ?? []).flatMap { $0.lastTransactions ?? [] }.first { $0.originalTransactionId == otid })
        let tx = try payload(try #require(item.signedTransactionInfo), as: JWSTransactionDecodedPayload.self)
        return (item.rawStatus ?? 0, tx.revocationDate != nil, tx.transactionId ?? "")
    }

    @Test("an answer in time preferring DECLINE (effect 1) turns a refund into REFUND_DECLINED: truth, status, history and events agree")
    func declineInTime() async throws {
        let sim = try await SimHarness.start(subscribers: 1500, options: Self.effect(1))
        defer { Task { try? await sim.stop() } }
        let r = try #require(sim.refundRequests(decision: .refund, after: sim.now).first { Self.terminal($0, sim.population) })
        let i = r.subscriber, txid = sim.population.transactionId(i, r.transactionIndex)
        try await sim.setClock(r.time + Self.hour)
        // The feed's index is built before the answer (and must not keep the refund after it).
        _ = try await sim.allNotifications(["startDate": r.time, "endDate": sim.now])
        #expect(try await sim.sendConsumption(txid, consumptionBody("DECLINE")).status == 202)
        var truth = try await sim.consumptionTruth(of: r)
        #expect(truth["decision"] as? String == "REFUND_DECLINED" && truth["decided_at"] is NSNull)
        #expect(truth["changed_by_answer"] as? Bool == true)
        let answers = try #require(truth["answers"] as? [[String: Any]])
        #expect(answers.count == 1 && answers[0]["in_time"] as? Bool == true)
        #expect(answers[0]["received_at"] as? String == SimTime.format(r.time + Self.hour))
        #expect((answers[0]["body"] as? [String: Any])?["refundPreference"] as? String == "DECLINE")

        try await sim.setClock(r.decisionTime + Self.hour)
        truth = try await sim.consumptionTruth(of: r)
        #expect(truth["decided_at"] as? String == SimTime.format(r.decisionTime))
        let s = try await Self.status(sim, i)
        #expect(s.status == 1 && !s.revoked && s.transactionId == txid)
        let types = try await Self.history(sim, i, from: r.time)
        #expect(types.contains { $0.type == "REFUND_DECLINED" && $0.date == r.decisionTime })
        #expect(!types.contains { $0.type == "REFUND" })
        // The whole feed, up to the change after the decision (the subscription went on).
        let next = try #require(sim.population.timeline(i).first { $0.time > r.decisionTime })
        try await sim.setClock(next.time + Self.hour)
        let feed = try await sim.allNotifications(["startDate": r.decisionTime, "endDate": sim.now]).items
            .map { try payload($0.signedPayload, as: RequestNotification.self) }
            .filter { try payload($0.data.signedTransactionInfo, as: JWSTransactionDecodedPayload.self).originalTransactionId == sim.population.originalTransactionId(i) }
        #expect(feed.map(\.notificationType) == ["REFUND_DECLINED", NotificationTypes.of(next).type])
        let events = try await sim.truthEvents(from: r.time, to: sim.now)
            .filter { $0["original_transaction_id"] as? String == sim.population.originalTransactionId(i) }.compactMap { $0["event"] as? String }
        #expect(events.contains("refund_declined") && !events.contains("refunded"), "\(events)")
        let refunds = try await sim.get("/inApps/v2/refund/lookup/\(txid)").decode(RefundHistoryResponse.self)
        #expect(refunds.signedTransactions?.isEmpty == true)
        // The subscription goes on as the customer had chosen: never refunded afterwards.
        let later = sim.population.state(i, at: r.decisionTime + 400 * Self.day)
        #expect(later.latest.revocation == nil && later.segment(at: later.at) != .refunded)
    }

    @Test("an answer after the deadline changes nothing and is marked; Apple's decision stands")
    func lateAnswer() async throws {
        let sim = try await SimHarness.start(subscribers: 1500, options: Self.effect(1))
        defer { Task { try? await sim.stop() } }
        let r = try #require(sim.refundRequests(decision: .refund, after: sim.now).first)
        let txid = sim.population.transactionId(r.subscriber, r.transactionIndex)
        try await sim.setClock(r.deadline + Self.minute)
        #expect(try await sim.sendConsumption(txid, consumptionBody("DECLINE")).status == 202)
        try await sim.setClock(r.decisionTime + Self.hour)
        let truth = try await sim.consumptionTruth(of: r)
        #expect(truth["decision"] as? String == "REFUND" && truth["changed_by_answer"] as? Bool == false)
        let answers = try #require(truth["answers"] as? [[String: Any]])
        #expect(answers.count == 1 && answers[0]["in_time"] as? Bool == false)
        let s = try await Self.status(sim, r.subscriber)
        #expect(s.status == 5 && s.revoked)
        #expect(try await Self.history(sim, r.subscriber, from: r.time).contains { $0.type == "REFUND" && $0.date == r.decisionTime })
    }

    @Test("an answer in time preferring GRANT_PRORATED (effect 1) turns a decline into a prorated refund that ends the subscription")
    func grantInTime() async throws {
        let sim = try await SimHarness.start(subscribers: 1500, options: Self.effect(1), configure: { $0.refundDeclinedRate = 0.05 })
        defer { Task { try? await sim.stop() } }
        let r = try #require(sim.refundRequests(decision: .refundDeclined, after: sim.now).first)
        let i = r.subscriber, txid = sim.population.transactionId(i, r.transactionIndex)
        try await sim.setClock(r.time + 11 * Self.hour)
        #expect(try await sim.sendConsumption(txid, consumptionBody("GRANT_PRORATED")).status == 202)
        try await sim.setClock(r.decisionTime + Self.hour)
        let truth = try await sim.consumptionTruth(of: r)
        #expect(truth["decision"] as? String == "REFUND" && truth["changed_by_answer"] as? Bool == true)
        let s = try await Self.status(sim, i)
        #expect(s.status == 5 && s.revoked && s.transactionId == txid)
        let refunds = try await sim.get("/inApps/v2/refund/lookup/\(txid)").decode(RefundHistoryResponse.self)
        let refunded = try payload(try #require(refunds.signedTransactions?.first), as: JWSTransactionDecodedPayload.self)
        #expect(refunded.rawRevocationType == "REFUND_PRORATED" && refunded.revocationPercentage == 50_000)
        #expect(refunded.rawRevocationReason == (r.reason == .fulfillmentIssue ? 1 : 0))
        let types = try await Self.history(sim, i, from: r.time)
        #expect(types.contains { $0.type == "REFUND" && $0.date == r.decisionTime } && !types.contains { $0.type == "REFUND_DECLINED" })
        #expect(sim.population.timeline(i).last?.time == r.decisionTime, "nothing happens after the refund")
    }
}

/// The decision rules in the model: the draw per request, the latest answer in time, what a
/// changed decision keeps of the timeline.
@Suite struct ConsumptionDecisionModelTests {
    static let start = PopulationConfig.defaultStart, hour = SimTime.hour

    static func population(_ n: Int = 2000, seed: UInt64 = 7) -> Population {
        var c = PopulationConfig(subscribers: n, seed: seed, start: start)
        c.refundDeclinedRate = 0.05
        return Population(config: c)
    }

    /// The answer that asks to turn `r`'s generated decision.
    static func turning(_ r: SimRefundRequest) -> ConsumptionInfo {
        ConsumptionInfo(customerConsented: true, sampleContentProvided: false, deliveryStatus: "DELIVERED",
                        refundPreference: r.decision == .refund ? "DECLINE" : "GRANT_FULL")
    }

    @Test("the effect is drawn once per request from the seed: the same requests turn on the same seed, about P of them; P = 0 turns none")
    func drawPerRequest() {
        let p = Self.population(), q = Self.population(), none = Self.population()
        // The first request of each subscription (a turned decision may remove later ones).
        let requests = (0..<p.count).compactMap { p.refundRequests($0).first }
        #expect(requests.count > 100)
        var turned = 0
        for r in requests {
            let a = p.answerConsumption(r.subscriber, transaction: r.transactionIndex, at: r.time + Self.hour, info: Self.turning(r), effect: 0.5)
            let b = q.answerConsumption(r.subscriber, transaction: r.transactionIndex, at: r.time + Self.hour, info: Self.turning(r), effect: 0.5)
            let c = none.answerConsumption(r.subscriber, transaction: r.transactionIndex, at: r.time + Self.hour, info: Self.turning(r), effect: 0)
            #expect(a.answer.inTime && a.answer.requestedAt == r.time)
            #expect(a.changed == b.changed && !c.changed)
            if a.changed {
                turned += 1
                #expect(p.refundRequests(r.subscriber).first { $0.time == r.time }?.decision != r.decision)
                #expect(p.decisionChanged(r.subscriber, at: r.decisionTime))
            }
        }
        let share = Double(turned) / Double(requests.count)
        #expect(share > 0.35 && share < 0.65, "share turned \(share)")
        #expect((0..<none.count).allSatisfy { Array(none.timeline($0)) == Array(none.generatedTimeline($0)) })
    }

    @Test("the latest answer in time counts: another answer turns the decision back, and again the same way; the deadline is inclusive")
    func latestAnswerCounts() throws {
        let p = Self.population()
        let r = try #require((0..<p.count).flatMap { p.refundRequests($0) }.first { $0.decision == .refund })
        let i = r.subscriber, generated = Array(p.timeline(i))
        let neutral = ConsumptionInfo(customerConsented: true, sampleContentProvided: true, deliveryStatus: "UNDELIVERED_OTHER")
        #expect(p.answerConsumption(i, transaction: r.transactionIndex, at: r.time, info: Self.turning(r), effect: 1).changed)
        let declined = Array(p.timeline(i))
        #expect(declined != generated && declined.contains { $0.time == r.decisionTime && $0.kind == .refundDeclined })
        #expect(p.answerConsumption(i, transaction: r.transactionIndex, at: r.time + Self.hour, info: neutral, effect: 1).changed)
        #expect(Array(p.timeline(i)) == generated && !p.decisionChanged(i, at: r.decisionTime))
        let atDeadline = p.answerConsumption(i, transaction: r.transactionIndex, at: r.deadline, info: Self.turning(r), effect: 1)
        #expect(atDeadline.answer.inTime && atDeadline.changed && Array(p.timeline(i)) == declined)
        let late = p.answerConsumption(i, transaction: r.transactionIndex, at: r.deadline + 1, info: neutral, effect: 1)
        #expect(!late.answer.inTime && !late.changed && Array(p.timeline(i)) == declined)
        // Before the request, or about another transaction: no request to answer.
        let early = p.answerConsumption(i, transaction: r.transactionIndex, at: r.time - 1, info: Self.turning(r), effect: 1)
        let other = p.answerConsumption(i, transaction: r.transactionIndex + 1, at: r.time + Self.hour, info: Self.turning(r), effect: 1)
        #expect(early.answer.requestedAt == nil && other.answer.requestedAt == nil && !early.changed && !other.changed)
        #expect(p.consumptionAnswers.count == 6)
    }

    @Test("a declined refund that Apple would have reversed loses the refund and the reversal, and keeps everything else")
    func reversedRefundDeclined() throws {
        let p = Self.population(3000)
        let r = try #require((0..<p.count).flatMap { p.refundRequests($0) }.first { r in
            r.decision == .refund && p.timeline(r.subscriber).contains { $0.kind == .refundReversed && $0.time > r.decisionTime }
        })
        let generated = Array(p.timeline(r.subscriber))
        let reversal = try #require(generated[(r.decisionIndex! + 1)...].firstIndex { $0.kind == .refundReversed })
        #expect(p.answerConsumption(r.subscriber, transaction: r.transactionIndex, at: r.time, info: Self.turning(r), effect: 1).changed)
        var expected = generated
        expected.remove(at: reversal)
        expected[r.decisionIndex!] = TimelineEvent(r.decisionTime, .refundDeclined)
        #expect(Array(p.timeline(r.subscriber)) == expected)
    }
}
