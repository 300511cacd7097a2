import ChurnModel
import Foundation
import Postgres

/// Revenue at risk in one segment and currency: the next renewal's price, summed over the
/// segment's subscriptions, as Apple signs it in the renewal info.
public struct SegmentRevenue: Sendable, Equatable {
    public var segment: String
    /// ISO 4217; nil for subscriptions without a renewal price (no renewal info yet).
    public var currency: String?
    public var subscriptions: Int
    /// Milliunits.
    public var renewalPrice: Int64

    public init(segment: String, currency: String?, subscriptions: Int, renewalPrice: Int64) {
        self.segment = segment
        self.currency = currency
        self.subscriptions = subscriptions
        self.renewalPrice = renewalPrice
    }
}

extension ChurnStore {
    /// Revenue at risk per segment and currency, for the segments whose next renewal is in doubt
    /// (`Segment.revenueAtRisk`, the same as the report's), in the contract's segment order,
    /// then by currency (none last).
    public func segmentRevenueAtRisk() async throws -> [SegmentRevenue] {
        let rows = try await pool.withConnection { db in
            try db.query("""
                SELECT segment, renewal_currency AS currency, count(*) AS n, coalesce(sum(renewal_price), 0)::bigint AS price
                FROM churnwatch.subscription_segments WHERE segment = ANY(\(Self.revenueAtRiskSegments)) AND bundle_id = \(app)
                GROUP BY 1, 2
                """).map { row in
                SegmentRevenue(segment: try row.decode(String.self, "segment"), currency: try row.decode(String?.self, "currency"),
                               subscriptions: try row.decode(Int.self, "n"), renewalPrice: try row.decode(Int64.self, "price"))
            }
        }
        let order = Dictionary(uniqueKeysWithValues: Segment.allCases.enumerated().map { ($1.rawValue, $0) })
        return rows.sorted {
            let (a, b) = (order[$0.segment] ?? Int.max, order[$1.segment] ?? Int.max)
            if a != b { return a < b }
            if $0.segment != $1.segment { return $0.segment < $1.segment }
            return ($0.currency ?? "\u{10FFFF}") < ($1.currency ?? "\u{10FFFF}")
        }
    }
}
