import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// One definition of revenue at risk (docs/contracts.md): `segments --revenue` and the report sum
/// the same segments.
@Suite("Revenue at risk: one definition")
struct RevenueAtRiskTests {
    @Test("segments --revenue and the report's panel cover exactly Segment.revenueAtRisk, with the same sums")
    func sameSegments() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let asOf = Date(timeIntervalSince1970: 1_795_255_200)
            // Two priced subscriptions in every segment, so any segment either query lets in shows.
            for (k, segment) in Segment.allCases.enumerated() {
                for n in 0..<2 {
                    try db.execute("""
                        INSERT INTO churnwatch.subscription_segments (original_transaction_id, product_id, segment, segment_since,
                            renewal_price, renewal_currency)
                        VALUES (\("\(segment.rawValue)-\(n)"), 'p1', \(segment.rawValue), \(asOf), \(Int64(1000 * (k + 1))), 'USD')
                        """)
                }
            }
            let rows = try await store.segmentRevenueAtRisk()
            #expect(Segment.revenueAtRisk == Segment.allCases.filter(Segment.revenueAtRisk.contains))
            #expect(Segment.revenueAtRisk.map(\.rawValue) == ["grace_period", "billing_retry", "will_not_renew", "price_increase_pending"])
            #expect(rows.map(\.segment) == Segment.revenueAtRisk.map(\.rawValue), "contract order, at-risk segments only")
            for row in rows {
                let k = try #require(Segment.allCases.firstIndex { $0.rawValue == row.segment })
                #expect(row.currency == "USD" && row.subscriptions == 2 && row.renewalPrice == Int64(2000 * (k + 1)))
            }
            let report = try #require(try await store.reportData(asOf: asOf, days: 7).revenue)
            #expect(Set(report.rows.map { "\($0.segment) \($0.currency) \($0.subscriptions) \($0.milliunits)" })
                    == Set(rows.map { "\($0.segment) \($0.currency ?? "") \($0.subscriptions) \($0.renewalPrice)" }))
        }
    }
}
