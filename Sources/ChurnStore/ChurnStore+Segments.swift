import ChurnModel
import Foundation
import Postgres

/// Segment sizes now, and their change since the latest recorded day before a given day
/// (`churnwatch segments`).
public struct SegmentSizes: Sendable, Equatable {
    /// One segment (or one segment and product).
    public struct Row: Sendable, Equatable {
        /// The segment's contract name (`will_not_renew`, ...).
        public var segment: String
        /// With a product breakdown: the product; nil for subscriptions never polled. Without
        /// one: always nil.
        public var productId: String?
        public var subscriptions: Int
        /// The size on `baselineDay`; nil when there is no baseline day.
        public var previous: Int?

        public init(segment: String, productId: String? = nil, subscriptions: Int, previous: Int?) {
            self.segment = segment
            self.productId = productId
            self.subscriptions = subscriptions
            self.previous = previous
        }

        /// `subscriptions - previous`; nil when there is no baseline day.
        public var change: Int? { previous.map { subscriptions - $0 } }
    }

    /// Every segment of docs/contracts.md in its order, zeros included (with a product breakdown:
    /// the products present now or on the baseline day, by product id, within each segment).
    public var rows: [Row]
    /// The day compared with (`2026-11-20`); nil when `segment_daily` has no earlier day.
    public var baselineDay: String?

    public var total: Int { rows.reduce(0) { $0 + $1.subscriptions } }
    public var previousTotal: Int? { baselineDay == nil ? nil : rows.reduce(0) { $0 + ($1.previous ?? 0) } }

    /// One segment and product ("" for none, as in `segment_daily`).
    public struct Key: Hashable, Sendable {
        public var segment: String
        public var productId: String

        public init(segment: String, productId: String = "") {
            self.segment = segment
            self.productId = productId
        }
    }

    /// Builds the rows from sizes now and on the baseline day (nil: no baseline day). Without
    /// `byProduct`, products are added up. Segments this version doesn't know come last, by name.
    public static func compare(current: [Key: Int], previous: [Key: Int]?, baselineDay: String?, byProduct: Bool) -> SegmentSizes {
        func fold(_ d: [Key: Int]) -> [Key: Int] {
            byProduct ? d : d.reduce(into: [:]) { $0[Key(segment: $1.key.segment), default: 0] += $1.value }
        }
        let now = fold(current)
        let before = previous.map(fold)
        let known = Segment.allCases.map(\.rawValue)
        let unknown = Set(now.keys.map(\.segment)).union(before?.keys.map(\.segment) ?? []).subtracting(known).sorted()
        var rows: [Row] = []
        for segment in known + unknown {
            var keys: [Key]
            if byProduct {
                let products = Set(now.keys.filter { $0.segment == segment }.map(\.productId))
                    .union(before?.keys.filter { $0.segment == segment }.map(\.productId) ?? [])
                keys = products.sorted().map { Key(segment: segment, productId: $0) }
                if keys.isEmpty && known.contains(segment) { keys = [Key(segment: segment)] }
            } else {
                keys = [Key(segment: segment)]
            }
            for key in keys {
                rows.append(Row(segment: segment, productId: byProduct && !key.productId.isEmpty ? key.productId : nil,
                                subscriptions: now[key] ?? 0, previous: before.map { $0[key] ?? 0 }))
            }
        }
        return SegmentSizes(rows: rows, baselineDay: baselineDay)
    }
}

extension ChurnStore {
    /// Segment sizes now (`subscription_segments`) against the latest day before `day` (UTC)
    /// in `segment_daily`.
    public func segmentSizes(comparedBefore day: Date, byProduct: Bool) async throws -> SegmentSizes {
        let dayText = Self.dayString(day)
        return try await pool.withConnection { db in
            var current: [SegmentSizes.Key: Int] = [:]
            for row in try db.query("""
                SELECT segment, coalesce(product_id, '') AS product_id, count(*) AS n
                FROM churnwatch.subscription_segments WHERE bundle_id = \(app) GROUP BY 1, 2
                """) {
                current[SegmentSizes.Key(segment: try row.decode(String.self, "segment"), productId: try row.decode(String.self, "product_id"))] =
                    try row.decode(Int.self, "n")
            }
            let baseline = try db.query("""
                SELECT to_char(max(day), 'YYYY-MM-DD') FROM churnwatch.segment_daily WHERE bundle_id = \(app) AND day < \(dayText)::date
                """)[0]
                .decode(String?.self, at: 0)
            var previous: [SegmentSizes.Key: Int]?
            if let baseline {
                var sizes: [SegmentSizes.Key: Int] = [:]
                for row in try db.query("""
                    SELECT segment, product_id, subscriptions FROM churnwatch.segment_daily
                    WHERE bundle_id = \(app) AND day = \(baseline)::date
                    """) {
                    sizes[SegmentSizes.Key(segment: try row.decode(String.self, "segment"), productId: try row.decode(String.self, "product_id")),
                          default: 0] += try row.decode(Int.self, "subscriptions")
                }
                previous = sizes
            }
            return SegmentSizes.compare(current: current, previous: previous, baselineDay: baseline, byProduct: byProduct)
        }
    }
}
