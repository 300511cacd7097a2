import ChurnModel
import Foundation
import Postgres

/// One segment's subscriptions and how many of them viewed the cancel page lately
/// (`subscription_segments.last_cancel_page_view_at`), for `churnwatch segments --cancel-page`.
public struct SegmentViews: Sendable, Equatable {
    public var segment: String
    public var subscriptions: Int
    /// Whose last view is within the window.
    public var viewed: Int
    /// Of those, the ones still renewing (auto-renew on, not churned or refunded).
    public var viewedStillRenewing: Int
}

extension ChurnStore {
    /// Every segment of the contract in its order (zeros included): subscriptions, and those
    /// whose last cancel-page view is within the `days` days up to `asOf`.
    public func segmentCancelPageViews(asOf: Date, days: Int) async throws -> [SegmentViews] {
        let counted = try await pool.withConnection { db in
            try db.query("""
                SELECT segment, count(*) AS n, count(*) FILTER (WHERE \(Self.viewedWithin(asOf: asOf, days: days))) AS viewed,
                       count(*) FILTER (WHERE \(Self.viewedWithin(asOf: asOf, days: days)) AND \(Self.stillRenewing)) AS renewing
                FROM churnwatch.subscription_segments WHERE bundle_id = \(app) GROUP BY 1
                """).map { row in
                SegmentViews(segment: try row.decode(String.self, "segment"), subscriptions: try row.decode(Int.self, "n"),
                             viewed: try row.decode(Int.self, "viewed"), viewedStillRenewing: try row.decode(Int.self, "renewing"))
            }
        }
        let bySegment = Dictionary(counted.map { ($0.segment, $0) }, uniquingKeysWith: { a, _ in a })
        return Segment.allCases.map { bySegment[$0.rawValue] ?? SegmentViews(segment: $0.rawValue, subscriptions: 0, viewed: 0, viewedStillRenewing: 0) }
    }

    /// The report's count: subscribers whose last view is in the window, and those still renewing.
    static func reportCancelPageViewers(_ db: PostgresConnection, app: String, asOf: Date, days: Int) throws -> (viewed: Int, stillRenewing: Int) {
        let row = try db.query("""
            SELECT count(*) AS viewed, count(*) FILTER (WHERE \(Self.stillRenewing)) AS renewing
            FROM churnwatch.subscription_segments WHERE bundle_id = \(app) AND \(Self.viewedWithin(asOf: asOf, days: days))
            """)[0]
        return (try row.decode(Int.self, "viewed"), try row.decode(Int.self, "renewing"))
    }

    private static func viewedWithin(asOf: Date, days: Int) -> PostgresQuery {
        "last_cancel_page_view_at > \(asOf) - make_interval(days => \(days)::int) AND last_cancel_page_view_at <= \(asOf)"
    }

    /// Auto-renew on and neither churned nor refunded: the view did not end in a cancellation (yet).
    private static let stillRenewing: PostgresQuery = "auto_renew AND segment NOT LIKE 'churned%' AND segment <> 'refunded'"
}
