@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore.segmentSizes (churnwatch segments)")
struct SegmentSizesTests {
    /// docs/contracts.md, in its order.
    static let contract = [
        "refunded", "churned_voluntary", "churned_billing", "churned_price_increase", "churned_product_unavailable",
        "churned_other", "grace_period", "billing_retry", "will_not_renew", "price_increase_pending",
        "plan_change_pending", "active", "unknown",
    ]
    static let today = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC

    static func seeded(_ fresh: FreshDatabase) throws {
        let db = try fresh.connect()
        try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
        let now: [(String, String?)] = [
            ("active", "pro"), ("active", "pro"), ("active", "pro"), ("active", "basic"),
            ("will_not_renew", "pro"), ("will_not_renew", "pro"), ("unknown", nil),
        ]
        for (i, (segment, product)) in now.enumerated() {
            try db.execute("""
                INSERT INTO churnwatch.subscription_segments (original_transaction_id, product_id, segment, segment_since)
                VALUES (\("s\(i)"), \(product), \(segment), \(today))
                """)
        }
        let daily: [(String, String, String, Int)] = [
            ("2026-11-18", "active", "pro", 10),
            ("2026-11-20", "active", "pro", 2), ("2026-11-20", "active", "basic", 1),
            ("2026-11-20", "will_not_renew", "pro", 3), ("2026-11-20", "billing_retry", "pro", 1),
            ("2026-11-21", "active", "pro", 3), // today's own figures are not the baseline
        ]
        for (day, segment, product, n) in daily {
            try db.execute("""
                INSERT INTO churnwatch.segment_daily (day, segment, product_id, subscriptions)
                VALUES (\(day)::date, \(segment), \(product), \(Int32(n)))
                """)
        }
    }

    @Test("every segment in contract order, zeros included, changed against the latest day before today")
    func sizesAndChange() async throws {
        try await FreshDatabase.with { fresh in
            try Self.seeded(fresh)
            let sizes = try await ChurnStore(pool: fresh.pool(size: 1), logger: .store).segmentSizes(comparedBefore: Self.today, byProduct: false)
            #expect(sizes.baselineDay == "2026-11-20")
            #expect(sizes.rows.map(\.segment) == Self.contract)
            let bySegment = Dictionary(uniqueKeysWithValues: sizes.rows.map { ($0.segment, $0) })
            #expect(bySegment["active"]?.subscriptions == 4 && bySegment["active"]?.change == 1)
            #expect(bySegment["will_not_renew"]?.subscriptions == 2 && bySegment["will_not_renew"]?.change == -1)
            #expect(bySegment["billing_retry"]?.subscriptions == 0 && bySegment["billing_retry"]?.change == -1)
            #expect(bySegment["unknown"]?.subscriptions == 1 && bySegment["unknown"]?.change == 1)
            #expect(bySegment["refunded"]?.subscriptions == 0 && bySegment["refunded"]?.change == 0)
            #expect(sizes.total == 7 && sizes.previousTotal == 7)
        }
    }

    @Test("by product: products present now or on the baseline day; never-polled ones without a product")
    func byProduct() async throws {
        try await FreshDatabase.with { fresh in
            try Self.seeded(fresh)
            let sizes = try await ChurnStore(pool: fresh.pool(size: 1), logger: .store).segmentSizes(comparedBefore: Self.today, byProduct: true)
            let rows = sizes.rows.filter { ["active", "billing_retry", "unknown", "refunded"].contains($0.segment) }
            #expect(rows == [
                .init(segment: "refunded", productId: nil, subscriptions: 0, previous: 0),
                .init(segment: "billing_retry", productId: "pro", subscriptions: 0, previous: 1),
                .init(segment: "active", productId: "basic", subscriptions: 1, previous: 1),
                .init(segment: "active", productId: "pro", subscriptions: 3, previous: 2),
                .init(segment: "unknown", productId: nil, subscriptions: 1, previous: 0),
            ])
        }
    }

    @Test("no earlier day: sizes without change")
    func noBaseline() async throws {
        try await FreshDatabase.with { fresh in
            try Self.seeded(fresh)
            let sizes = try await ChurnStore(pool: fresh.pool(size: 1), logger: .store)
                .segmentSizes(comparedBefore: Self.today.addingTimeInterval(-3 * 86_400), byProduct: false)
            #expect(sizes.baselineDay == nil)
            #expect(sizes.rows.allSatisfy { $0.previous == nil && $0.change == nil })
            #expect(sizes.total == 7 && sizes.previousTotal == nil)
        }
    }

    @Test("a segment this version doesn't know is kept, after the known ones")
    func unknownSegmentName() {
        let sizes = SegmentSizes.compare(
            current: [.init(segment: "active", productId: "pro"): 2, .init(segment: "future_segment"): 1],
            previous: [.init(segment: "active", productId: "pro"): 5],
            baselineDay: "2026-11-20", byProduct: false)
        #expect(sizes.rows.map(\.segment) == Self.contract + ["future_segment"])
        #expect(sizes.rows.last == .init(segment: "future_segment", subscriptions: 1, previous: 0))
        #expect(sizes.rows.first { $0.segment == "active" }?.change == -3)
    }
}
