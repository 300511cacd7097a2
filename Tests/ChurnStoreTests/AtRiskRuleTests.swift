import ChurnModel
import Foundation
import Postgres
import Testing
@testable import ChurnStore

/// The nightly `at_risk` due reason restates the segment classifier in SQL (over the columns the
/// batch writer stores). Both run over the same crafted subscriptions here, so neither can drift
/// from the other unnoticed (docs/architecture.md §1).
@Suite("The at_risk due rule agrees with the segment classifier")
struct AtRiskRuleTests {
    static let asOf = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC
    static let day: TimeInterval = 86_400
    /// What the rule stands for: active, but the next renewal won't happen as it stands.
    static let atRiskSegments: Set<Segment> = [.willNotRenew, .priceIncreasePending, .planChangePending]

    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var status: Int? = 1
        var renewal = true
        var autoRenew: Int? = 1
        var priceIncrease: Int?
        var renewsInto: String? = "pro"
        var revoked = false
        var intent: Int?
        /// Why the rule, on purpose, polls a subscription the classifier doesn't call at risk.
        var ruleOnly: String?
        var description: String { name }

        var snapshot: SubscriptionSnapshot {
            let at = AtRiskRuleTests.asOf
            let transaction = TransactionFacts(
                originalTransactionId: name, transactionId: "\(name)-1", productId: "pro",
                purchaseDate: at.addingTimeInterval(-100 * AtRiskRuleTests.day), expiresDate: at.addingTimeInterval(265 * AtRiskRuleTests.day),
                revocationDate: revoked ? at.addingTimeInterval(-AtRiskRuleTests.day) : nil)
            let renewalFacts = renewal ? RenewalFacts(
                originalTransactionId: name, autoRenewProductId: renewsInto, productId: "pro", autoRenewStatus: autoRenew,
                expirationIntent: intent, priceIncreaseStatus: priceIncrease) : nil
            return SubscriptionSnapshot(status: status, transaction: transaction, renewal: renewalFacts, asOf: at)
        }
    }

    static let cases: [Case] = [
        Case(name: "active"),
        Case(name: "auto-renew off", autoRenew: 0),
        Case(name: "auto-renew unknown value", autoRenew: 7),
        Case(name: "price increase pending", priceIncrease: 0),
        Case(name: "price increase accepted", priceIncrease: 1),
        Case(name: "price increase unknown value", priceIncrease: 4),
        Case(name: "downgrade pending", renewsInto: "lite"),
        Case(name: "off and pending increase", autoRenew: 0, priceIncrease: 0),
        Case(name: "off and plan change", autoRenew: 0, renewsInto: "lite"),
        Case(name: "increase and plan change", priceIncrease: 0, renewsInto: "lite"),
        Case(name: "expired, auto-renew off", status: 2, autoRenew: 0, intent: 1),
        Case(name: "expired, plan change", status: 2, autoRenew: 0, renewsInto: "lite", intent: 1),
        Case(name: "billing retry, auto-renew off", status: 3, autoRenew: 0),
        Case(name: "grace, pending increase", status: 4, priceIncrease: 0),
        Case(name: "revoked status", status: 5, autoRenew: 0),
        Case(name: "unknown status", status: 9, autoRenew: 0),
        Case(name: "revoked, active on, nothing pending", revoked: true),
        Case(name: "revoked, status still active, auto-renew off", autoRenew: 0, revoked: true,
             ruleOnly: "a revocation the status hasn't caught up with: one more look costs a call"),
        Case(name: "no renewal info", renewal: false,
             ruleOnly: "without renewal info the renewal product is unknown: polled until it is known"),
        Case(name: "renewal info without a renewal product", renewsInto: nil,
             ruleOnly: "without renewal info the renewal product is unknown: polled until it is known"),
    ]

    @Test("the SQL rule selects exactly the subscriptions the classifier puts in an at-risk segment")
    func agree() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            for c in Self.cases {
                // The columns as the batch writer stores them (SubscriptionColumns).
                let s = c.snapshot
                try db.execute("""
                    INSERT INTO churnwatch.subscriptions (original_transaction_id, state, product_id, auto_renew_product_id,
                        auto_renew, price_increase_status, revocation_date, period_start, expires_at, last_success_at, last_outcome)
                    VALUES (\(c.name), \(s.state == .unknown ? nil : s.state.rawValue), \(s.productId), \(s.autoRenewProductId),
                        \(s.autoRenew), \(s.rawPriceIncreaseStatus.map { Int32(clamping: $0) }), \(s.revocationDate),
                        \(s.periodStart), \(s.periodEnd), \(Self.asOf.addingTimeInterval(-Self.day)), 'ok')
                    """)
            }
            let rule = try #require(ChurnStore.dueRules(asOf: Self.asOf, windows: PlanWindows()).first { $0.reason == .atRisk })
            let selected = Set(try db.query("SELECT original_transaction_id FROM churnwatch.subscriptions WHERE \(rule.condition)")
                .map { try $0.decode(String.self, at: 0) })
            for c in Self.cases {
                let segment = SegmentClassifier.segment(for: c.snapshot, asOf: Self.asOf)
                let classifier = Self.atRiskSegments.contains(segment)
                if let why = c.ruleOnly {
                    #expect(selected.contains(c.name) && !classifier, "\(c.name) (\(segment.rawValue)): \(why)")
                } else {
                    #expect(selected.contains(c.name) == classifier, "\(c.name): classifier says \(segment.rawValue)")
                }
            }
            #expect(Self.cases.contains { Self.atRiskSegments.contains(SegmentClassifier.segment(for: $0.snapshot, asOf: Self.asOf)) })
        }
    }
}
