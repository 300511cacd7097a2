import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore.planCounts (due selection)")
struct PlanTests {
    static let asOf = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC
    static let day: TimeInterval = 86_400

    /// One subscription per situation; `expected` is the reason it must be planned for (nil: not due).
    struct Case: Sendable, CustomStringConvertible {
        var id: String
        var expected: DueReason?
        var state: String?
        var periodStart: TimeInterval?   // relative to asOf
        var expires: TimeInterval?
        var autoRenew: Bool?
        var priceIncrease: Int?
        var renewsInto: String? = nil
        var lastSuccess: TimeInterval?
        var lastOutcome: String?
        var description: String { id }
    }

    static let cases: [Case] = [
        Case(id: "never-polled", expected: .new, state: nil, lastSuccess: nil, lastOutcome: nil),
        Case(id: "failed-last-night", expected: .failed, state: "active", periodStart: -100 * day, expires: 200 * day, autoRenew: true, lastSuccess: -5 * day, lastOutcome: "failed"),
        Case(id: "billing-retry", expected: .billingTrouble, state: "billing_retry", periodStart: -40 * day, expires: -10 * day, autoRenew: true, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "billing-retry-too-old", expected: nil, state: "billing_retry", periodStart: -100 * day, expires: -70 * day, autoRenew: true, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "grace", expected: .billingTrouble, state: "grace_period", periodStart: -31 * day, expires: -1 * day, autoRenew: true, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "auto-renew-off-mid-year", expected: .atRisk, state: "active", periodStart: -100 * day, expires: 265 * day, autoRenew: false, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "price-increase-pending", expected: .atRisk, state: "active", periodStart: -100 * day, expires: 265 * day, autoRenew: true, priceIncrease: 0, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "downgrade-pending", expected: .atRisk, state: "active", periodStart: -100 * day, expires: 265 * day, autoRenew: true, renewsInto: "basic", lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "ends-in-2-days", expected: .periodEnd, state: "active", periodStart: -28 * day, expires: 2 * day, autoRenew: true, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "ended-2-days-ago", expected: .periodEnd, state: "expired", periodStart: -32 * day, expires: -2 * day, autoRenew: false, lastSuccess: -3 * day, lastOutcome: "ok"),
        Case(id: "started-yesterday", expected: .periodStart, state: "active", periodStart: -1 * day, expires: 29 * day, autoRenew: true, lastSuccess: -1 * day, lastOutcome: "ok"),
        Case(id: "yearly-far-from-renewal", expected: nil, state: "active", periodStart: -100 * day, expires: 265 * day, autoRenew: true, lastSuccess: -10 * day, lastOutcome: "ok"),
        Case(id: "stale", expected: .stale, state: "active", periodStart: -100 * day, expires: 265 * day, autoRenew: true, lastSuccess: -31 * day, lastOutcome: "ok"),
        Case(id: "long-expired", expected: nil, state: "expired", periodStart: -400 * day, expires: -370 * day, autoRenew: false, lastSuccess: -5 * day, lastOutcome: "ok"),
        Case(id: "ends-soon-but-polled-an-hour-ago", expected: nil, state: "active", periodStart: -28 * day, expires: 2 * day, autoRenew: true, lastSuccess: -3600, lastOutcome: "ok"),
        Case(id: "at-risk-and-ending: first reason wins", expected: .atRisk, state: "active", periodStart: -28 * day, expires: 1 * day, autoRenew: false, lastSuccess: -1 * day, lastOutcome: "ok"),
    ]

    /// Migrates and inserts one subscription per case.
    static func insertCases(_ db: PostgresConnection) throws {
        try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
        for c in cases {
            func at(_ offset: TimeInterval?) -> Date? { offset.map { asOf.addingTimeInterval($0) } }
            try db.execute("""
                INSERT INTO churnwatch.subscriptions (original_transaction_id, state, product_id, auto_renew_product_id,
                    period_start, expires_at, auto_renew, price_increase_status, last_success_at, last_polled_at, last_outcome)
                VALUES (\(c.id), \(c.state), \(c.state == nil ? nil : "pro"), \(c.state == nil ? nil : (c.renewsInto ?? "pro")),
                    \(at(c.periodStart)), \(at(c.expires)), \(c.autoRenew), \(c.priceIncrease.map(Int32.init)),
                    \(at(c.lastSuccess)), \(at(c.lastSuccess)), \(c.lastOutcome))
                """)
        }
    }

    @Test("each situation is planned for exactly its first reason, or not at all")
    func reasons() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Self.insertCases(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let counts = try await store.planCounts(asOf: Self.asOf, windows: PlanWindows())
            var expected: [DueReason: Int] = [:]
            for c in Self.cases { if let r = c.expected { expected[r, default: 0] += 1 } }
            #expect(counts.byReason == expected)
            #expect(counts.total == Self.cases.filter { $0.expected != nil }.count)
        }
    }

    @Test("a nightly run plans what plan counts: one item per due subscription, for its first reason and that reason's priority")
    func runPlansTheSame() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Self.insertCases(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let counts = try await store.planCounts(asOf: Self.asOf, windows: PlanWindows())
            let (run, byReason) = try await store.runCreateNightly(asOf: Self.asOf, windows: PlanWindows(), params: StoredJSON(text: "{}"))
            #expect(byReason == counts.byReason)
            #expect(run.due == counts.total)
            var planned: [String: DueReason] = [:]
            for row in try db.query("SELECT original_transaction_id, reason, priority FROM churnwatch.run_items WHERE run_id = \(run.id)") {
                let reason = try #require(DueReason(rawValue: try row.decode(String.self, "reason")))
                #expect(try row.decode(Int16.self, "priority") == reason.priority)
                planned[try row.decode(String.self, "original_transaction_id")] = reason
            }
            var expected: [String: DueReason] = [:]
            for c in Self.cases { if let r = c.expected { expected[c.id] = r } }
            #expect(planned == expected)
            // The planner's statistics know the new run's items (else every claim scans the run).
            let reltuples = try db.query("SELECT reltuples::float8 FROM pg_class WHERE oid = 'churnwatch.run_items'::regclass")[0].decode(Double.self, at: 0)
            #expect(reltuples == Double(run.due))
        }
    }
}
