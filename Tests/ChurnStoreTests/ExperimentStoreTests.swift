import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// Experiments as stored (issue 50): added on a rule, allocations numbered, the first exposure's
/// arm kept (sticky) and read back by the lookup, the counts by period and arm, the rule kept
/// from removal while an experiment runs, and `stop --keep` writing the winner into the rule.
@Suite("experiments in the store")
struct ExperimentStoreTests {
    static let m1 = "a1111111-1111-4111-8111-111111111111", m2 = "b2222222-2222-4222-8222-222222222222"
    static let t0 = Date(timeIntervalSince1970: 1_795_255_200)

    static func record(_ id: UUID, _ otid: String, at: Date, arm: String, period: Int) -> RetentionRequestRecord {
        RetentionRequestRecord(requestIdentifier: id, originalTransactionId: otid, productId: "monthly", userLocale: "en-US",
                               environment: "Production", signedAt: at, arm: arm == "holdout" ? .holdout : .treated, ruleName: "everyone",
                               ruleKind: .message, answerKind: arm == "holdout" ? nil : .message, messageId: nil, segment: .active, tenureDays: 30,
                               periodEndsAt: at + 10 * 86_400, factsKnown: true, answer: nil,
                               experiment: "exp", experimentArm: arm, experimentPeriod: period)
    }

    static func experiment() -> ExperimentRecord {
        let arms = [ExperimentArm(name: "a", kind: .message, messageId: m1), ExperimentArm(name: "b", kind: .promotionalOffer, messageId: m2, offerId: "SAVE50", discount: 0.5)]
        return ExperimentRecord(experiment: Experiment(name: "exp", ruleName: "everyone", allocation: .adaptive, holdout: 0.2, arms: arms,
                                                       period: 0, weights: Experiment.equalWeights(arms)), startedAt: t0)
    }

    @Test("add needs the rule; periods are numbered; the first exposure's arm is kept and looked up; the rule cannot be removed while it runs")
    func lifecycle() async throws {
        try await FreshDatabase.with { fresh in
            _ = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            await #expect(throws: ExperimentError.self) { try await store.experimentAdd(Self.experiment(), by: "test") }
            try await store.retentionRuleSet(RetentionRule(name: "everyone", kind: .message, messageId: Self.m1))
            try await store.experimentAdd(Self.experiment(), by: "test")
            await #expect(throws: ExperimentError.self) { try await store.experimentAdd(Self.experiment(), by: "test") }
            let running = try await store.experiments(runningOnly: true)
            #expect(running.map(\.experiment.name) == ["exp"] && running[0].experiment.weights == ["a": 0.5, "b": 0.5])

            // Sticky: the first exposure (arm b) is what the lookup returns, whatever later records say.
            try await store.retentionRecord([Self.record(UUID(), "s-1", at: Self.t0 + 60, arm: "b", period: 0)])
            try await store.retentionRecord([Self.record(UUID(), "s-1", at: Self.t0 + 120, arm: "a", period: 1)])
            let found = try await store.retentionLookup(originalTransactionId: "s-1", requestIdentifier: UUID())
            #expect(found.assignments == ["exp": ExperimentAssignment(arm: "b", period: 0)])

            // A new period only after the one read; a second writer of the same period writes nothing.
            #expect(try await store.experimentAllocate("exp", after: 0, at: Self.t0 + 86_400, by: "test", reason: "reallocated",
                                                       weights: ["a": 0.2, "b": 0.8], previous: ["a": 0.5, "b": 0.5], posterior: nil))
            #expect(try await !store.experimentAllocate("exp", after: 0, at: Self.t0 + 86_400, by: "test", reason: "again",
                                                        weights: ["a": 0.9, "b": 0.1], previous: nil, posterior: nil))
            #expect(try await store.experimentAllocations("exp").map(\.period) == [0, 1])
            #expect(try await store.experiments(runningOnly: true)[0].experiment.weights == ["a": 0.2, "b": 0.8])

            await #expect(throws: ExperimentError.self) { _ = try await store.retentionRuleRemove("everyone") }
            try await store.experimentChangeArms("exp", retire: ["a"], revive: [], add: [], weights: nil, at: Self.t0 + 2 * 86_400, by: "test")
            let after = try await store.experiments(runningOnly: true)[0].experiment
            #expect(after.period == 2 && after.weights == ["b": 1] && after.arms.first { $0.name == "a" }?.retired == true)

            try await store.experimentStop("exp", keep: "b", at: Self.t0 + 3 * 86_400)
            #expect(try await store.experiments(runningOnly: true).isEmpty)
            let rule = try await store.retentionRules().rules.first { $0.name == "everyone" }
            #expect(rule?.kind == .promotionalOffer && rule?.offerId == "SAVE50" && rule?.holdout == 0.2)
            #expect(try await store.retentionRuleRemove("everyone") == 1)
        }
    }

    @Test("the horizon: the stored period end when it is after the view; when it had passed, the next boundary by the period's length; else 35 days on")
    func horizon() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let view = Self.t0, day = 86_400.0
            func h(_ end: Date?, _ period: Double?) throws -> Date {
                try db.query("""
                    SELECT churnwatch.cancel_page_horizon(\(view), \(end), \(period.map { "\(Int($0)) seconds" })::interval) AS h
                    """)[0].decode(Date.self, "h")
            }
            #expect(try h(view + 3 * day, 30 * day) == view + 3 * day)
            // A monthly renewal 2 days before the view that churnwatch had not seen: the next one, 28 days on.
            #expect(try h(view - 2 * day, 30 * day) == view + 28 * day)
            // A yearly one 10 days before: the end of the new year, not 35 days on (a cancellation would count as a save).
            #expect(try h(view - 10 * day, 365 * day) == view + 355 * day)
            #expect(try h(view - 30 * day, 30 * day) == view + 30 * day)
            #expect(try h(nil, 30 * day) == view + 35 * day && h(view - day, nil) == view + 35 * day)
        }
    }

    @Test("counts: each subscriber once, in the period and arm of the first exposure; the 24-hour metric from auto-renew events; the long outcome from the stored period")
    func counts() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await store.retentionRuleSet(RetentionRule(name: "everyone", kind: .message, messageId: Self.m1))
            try await store.experimentAdd(Self.experiment(), by: "test")
            let t = Self.t0
            try await store.retentionRecord([
                Self.record(UUID(), "s-1", at: t, arm: "a", period: 0), Self.record(UUID(), "s-1", at: t + 3600, arm: "a", period: 0),
                Self.record(UUID(), "s-2", at: t, arm: "a", period: 0), Self.record(UUID(), "s-3", at: t, arm: "holdout", period: 0),
                Self.record(UUID(), "s-4", at: t + 86_400, arm: "b", period: 1), Self.record(UUID(), "s-5", at: t, arm: "a", period: 0),
            ])
            // s-2 turned auto-renew off an hour after the view; s-1 renewed past its horizon (10 days on); s-2 was polled after it, lost;
            // s-5 expired at its horizon and came back 30 days later: lost, though its period now ends after the horizon.
            try db.execute("""
                INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at, details, bundle_id)
                VALUES ('s-2', 'auto_renew_disabled', \(t + 3600), now(), '{}', 'com.example.churnwatch'),
                       ('s-5', 'expired', \(t + 10 * 86_400), now(), '{}', 'com.example.churnwatch')
                """)
            try db.execute("""
                INSERT INTO churnwatch.subscriptions (original_transaction_id, bundle_id, expires_at, last_success_at, snapshot)
                VALUES ('s-1', 'com.example.churnwatch', \(t + 40 * 86_400), \(t + 12 * 86_400), '{"renewal_price": 9990, "renewal_currency": "USD"}'),
                       ('s-2', 'com.example.churnwatch', \(t + 10 * 86_400), \(t + 12 * 86_400), '{}'),
                       ('s-5', 'com.example.churnwatch', \(t + 70 * 86_400), \(t + 41 * 86_400), '{}')
                """)
            let cells = try await store.experimentCounts("exp", asOf: t + 20 * 86_400, decisionHours: 24)
            let a = cells.first { $0.period == 0 && $0.arm == "a" }
            #expect(a.map { [$0.exposed, $0.matured, $0.renewing, $0.decided, $0.saved] } == [3, 3, 2, 3, 1])
            #expect(a?.savedPrice == ["USD": 9990])
            #expect(cells.first { $0.arm == "holdout" }.map { [$0.exposed, $0.decided] } == [1, 0])
            #expect(cells.first { $0.arm == "b" }?.period == 1)
            // Not matured a day before: the view is less than 24 hours old.
            let early = try await store.experimentCounts("exp", asOf: t + 3 * 3600, decisionHours: 24)
            #expect(early.allSatisfy { $0.matured == 0 })
        }
    }
}
