import ChurnModel
import Foundation

/// Everything `churnwatch report` shows, built from the rows the store read (``ReportRows``) and
/// rendered by `ReportPage` without any I/O. Strings are database values: the renderer escapes
/// every one of them. Days are `YYYY-MM-DD` (UTC).
public struct ReportData: Sendable, Equatable {
    /// The moment the report describes (`--as-of`, default now).
    public var asOf: Date
    /// The app (bundle id) it describes; "" for a database whose app is not known.
    public var app = ""
    /// The number of days the time series cover, ending with the as-of day.
    public var days: Int
    /// False when the database has no churnwatch schema yet: the page says so.
    public var migrated = true
    /// Subscriptions registered (`churnwatch.subscriptions`).
    public var subscriptions = 0

    /// Segment sizes per day (`segment_daily`, products added up), oldest first.
    public var segmentDays: [SegmentDay] = []
    /// Sizes per segment and product on the newest day of `segmentDays`.
    public var segmentProducts: [SegmentProduct] = []
    /// Events per detection day and kind (`churn_events.detected_at`).
    public var events: [EventCount] = []
    /// Moves between segments (`segment_changes`) over the last 7 and 30 days.
    public var flows: [Flow] = []
    /// Subscribers in billing retry and grace now, and the recovery curve.
    public var billing = Billing()
    /// The win-back queue by campaign and status.
    public var winback: [WinbackCount] = []
    /// Measured outcomes per campaign and offer (`ChurnStore.outcomeSummaries`, all entries,
    /// horizons judged at the as-of time); empty when no entry exists yet.
    public var outcomes: [Outcome] = []
    /// Revenue at risk per segment and currency; nil when no renewal price is stored.
    public var revenue: Revenue?
    /// The newest runs (at most 10), newest first.
    public var runs: [RunRow] = []
    /// Apple's refund requests signed in the window, answered and decided (`refund_requests`).
    public var refunds = RefundSummary()
    /// Cancel-page views in the window by arm and what was shown, and their outcomes.
    public var cancelViews: [ReportRows.CancelViewCount] = []
    public var cancelOutcomes: [Outcome] = []
    /// Subscribers whose last cancel-page view is in the window, and those still renewing.
    public var cancelViewers = 0
    public var cancelViewersStillRenewing = 0
    /// The app's webhook endpoints (none: the panel says how to add one).
    public var webhooks: [ReportRows.WebhookRow] = []
    /// Cancel-page experiments running at the as-of time or stopped in the window (none: the
    /// panel says how to start one).
    public var experiments: [ExperimentReportRow] = []

    public init(asOf: Date, days: Int) {
        self.asOf = asOf
        self.days = days
    }

    /// The page's figures from the store's rows: sizes grouped per day (oldest first), revenue
    /// nil when no renewal price is known.
    public init(_ rows: ReportRows) {
        self.init(asOf: rows.asOf, days: rows.days)
        app = rows.app
        migrated = rows.migrated
        subscriptions = rows.subscriptions
        var sizes: [String: [String: Int]] = [:]
        for s in rows.segmentSizes { sizes[s.day, default: [:]][s.segment, default: 0] += s.subscriptions }
        segmentDays = sizes.keys.sorted().map { SegmentDay(day: $0, sizes: sizes[$0] ?? [:]) }
        segmentProducts = rows.segmentProducts
        events = rows.events
        flows = rows.flows
        billing = rows.billing
        winback = rows.winback
        outcomes = rows.outcomes
        revenue = rows.revenue.isEmpty ? nil : Revenue(rows: rows.revenue)
        runs = rows.runs
        refunds = rows.refunds
        cancelViews = rows.cancelViews
        cancelOutcomes = rows.cancelOutcomes
        (cancelViewers, cancelViewersStillRenewing) = (rows.cancelViewers, rows.cancelViewersStillRenewing)
        webhooks = rows.webhooks
        experiments = rows.experiments
    }

    /// True when there is nothing at all to show: no subscriptions, no history, no runs.
    public var isEmpty: Bool {
        subscriptions == 0 && segmentDays.isEmpty && events.isEmpty && runs.isEmpty && winback.isEmpty
    }

    public typealias SegmentProduct = ReportRows.SegmentProduct
    public typealias EventCount = ReportRows.EventCount
    public typealias Flow = ReportRows.Flow
    public typealias Billing = ReportRows.Billing
    public typealias RecoveryPoint = ReportRows.RecoveryPoint
    public typealias WinbackCount = ReportRows.WinbackCount
    public typealias Outcome = ReportRows.Outcome
    public typealias RevenueRow = ReportRows.RevenueRow
    public typealias RunRow = ReportRows.RunRow

    public struct SegmentDay: Sendable, Equatable {
        public var day: String
        /// Subscriptions per segment name on that day (segments with none are absent).
        public var sizes: [String: Int]
        public init(day: String, sizes: [String: Int]) {
            self.day = day
            self.sizes = sizes
        }
        public var total: Int { sizes.values.reduce(0, +) }
    }

    public struct Revenue: Sendable, Equatable {
        public var rows: [RevenueRow]
        public init(rows: [RevenueRow]) { self.rows = rows }
    }
}
