import Foundation

/// What `churnwatch report` reads from the database, row by row, as `ChurnStore.reportRows`
/// returns it in one snapshot: no presentation (the report module builds its `ReportData` from
/// these). Strings are database values. Days are `YYYY-MM-DD` (UTC).
public struct ReportRows: Sendable, Equatable {
    /// The moment the report describes (`--as-of`, default now).
    public var asOf: Date
    /// The app (bundle id) it describes.
    public var app = ""
    /// The number of days the time series cover, ending with the as-of day.
    public var days: Int
    /// False when the database has no churnwatch schema yet.
    public var migrated = true
    /// Subscriptions registered (`churnwatch.subscriptions`).
    public var subscriptions = 0
    /// Subscriptions per day and segment in the window (`segment_daily`, products added up).
    public var segmentSizes: [SegmentSize] = []
    /// Sizes per segment and product on the newest day of `segmentSizes`.
    public var segmentProducts: [SegmentProduct] = []
    /// Events per detection day and kind (`churn_events.detected_at`).
    public var events: [EventCount] = []
    /// Moves between segments (`segment_changes`) over the last 7 and 30 days.
    public var flows: [Flow] = []
    /// Subscribers in billing retry and grace now, and the recovery curve.
    public var billing = Billing()
    /// The win-back queue by campaign and status.
    public var winback: [WinbackCount] = []
    /// Measured outcomes per campaign and offer (all entries, horizons judged at the as-of time).
    public var outcomes: [Outcome] = []
    /// Revenue at risk per segment and currency (empty when no renewal price is stored).
    public var revenue: [RevenueRow] = []
    /// The newest runs (at most 10), newest first.
    public var runs: [RunRow] = []
    /// Apple's refund requests signed in the window, answered and decided (`refund_requests`).
    public var refunds = RefundSummary()
    /// Cancel-page views in the window, by arm and what was shown (`retention_message_requests`).
    public var cancelViews: [CancelViewCount] = []
    /// The cancel page's outcomes per kind of answer (campaign `cancel_page`, `offerId` the kind).
    public var cancelOutcomes: [Outcome] = []
    /// Subscribers whose last cancel-page view is in the window, and those of them still
    /// renewing (auto-renew on, not churned or refunded): `subscription_segments.last_cancel_page_view_at`.
    public var cancelViewers = 0
    public var cancelViewersStillRenewing = 0
    /// The app's webhook endpoints and their deliveries (docs/webhooks.md).
    public var webhooks: [WebhookRow] = []
    /// Cancel-page experiments running at the as-of time or stopped within the window, by name.
    public var experiments: [ExperimentReportRow] = []

    public init(asOf: Date, days: Int) {
        self.asOf = asOf
        self.days = days
    }

    public struct SegmentSize: Sendable, Equatable {
        public var day: String
        public var segment: String
        public var subscriptions: Int
        public init(day: String, segment: String, subscriptions: Int) {
            self.day = day
            self.segment = segment
            self.subscriptions = subscriptions
        }
    }

    public struct SegmentProduct: Sendable, Equatable {
        public var segment: String
        /// "" when unknown (never polled), as in `segment_daily`.
        public var productId: String
        public var subscriptions: Int
        public init(segment: String, productId: String, subscriptions: Int) {
            self.segment = segment
            self.productId = productId
            self.subscriptions = subscriptions
        }
    }

    public struct EventCount: Sendable, Equatable {
        public var day: String
        public var event: String
        public var count: Int
        public init(day: String, event: String, count: Int) {
            self.day = day
            self.event = event
            self.count = count
        }
    }

    public struct Flow: Sendable, Equatable {
        public var from: String
        public var to: String
        /// Moves in the 7 days up to the as-of time.
        public var last7: Int
        /// Moves in the 30 days up to the as-of time (includes `last7`).
        public var last30: Int
        public init(from: String, to: String, last7: Int, last30: Int) {
            self.from = from
            self.to = to
            self.last7 = last7
            self.last30 = last30
        }
    }

    public struct Billing: Sendable, Equatable {
        public var inRetry = 0
        public var inGrace = 0
        /// Day 0, 1, ... since an episode's first failure.
        public var recovery: [RecoveryPoint] = []
        public init(inRetry: Int = 0, inGrace: Int = 0, recovery: [RecoveryPoint] = []) {
            self.inRetry = inRetry
            self.inGrace = inGrace
            self.recovery = recovery
        }
    }

    /// Of the billing-trouble episodes that began at least `day` days before the as-of time
    /// (`observed`), those that had recovered within `day` days (`recovered`).
    public struct RecoveryPoint: Sendable, Equatable {
        public var day: Int
        public var observed: Int
        public var recovered: Int
        public init(day: Int, observed: Int, recovered: Int) {
            self.day = day
            self.observed = observed
            self.recovered = recovered
        }
        /// nil when no episode is old enough.
        public var share: Double? { observed > 0 ? Double(recovered) / Double(observed) : nil }
    }

    public struct WinbackCount: Sendable, Equatable {
        public var campaign: String
        public var status: String
        public var count: Int
        public init(campaign: String, status: String, count: Int) {
            self.campaign = campaign
            self.status = status
            self.count = count
        }
    }

    /// Cancel-page views of one arm that were shown one thing (`default`: the default message;
    /// `none`: no answer, Apple's own default).
    public struct CancelViewCount: Sendable, Equatable {
        public var arm: String, shown: String, count: Int
        public init(arm: String, shown: String, count: Int) { (self.arm, self.shown, self.count) = (arm, shown, count) }
    }

    /// One campaign and offer of the retention loop (docs/churn-model.md §6). Counts only: the
    /// renderer derives shares and the uplift interval with `UpliftEstimate`.
    public struct Outcome: Sendable, Equatable {
        public var campaign: String
        /// nil for entries created without an offer.
        public var offerId: String?
        /// Treated (not held out) entries, those acked (`done`), those decided and those saved.
        public var entries: Int, delivered: Int, decided: Int, saved: Int
        /// The same for the holdout.
        public var holdoutEntries: Int, holdoutDecided: Int, holdoutSaved: Int
        public var medianDaysToSave: Double?
        /// Renewal price × treated saves, per currency, in milliunits.
        public var revenueKept: [String: Int64]
        public init(campaign: String, offerId: String?, entries: Int, delivered: Int, decided: Int, saved: Int,
                    holdoutEntries: Int, holdoutDecided: Int, holdoutSaved: Int, medianDaysToSave: Double?,
                    revenueKept: [String: Int64]) {
            self.campaign = campaign
            self.offerId = offerId
            self.entries = entries
            self.delivered = delivered
            self.decided = decided
            self.saved = saved
            self.holdoutEntries = holdoutEntries
            self.holdoutDecided = holdoutDecided
            self.holdoutSaved = holdoutSaved
            self.medianDaysToSave = medianDaysToSave
            self.revenueKept = revenueKept
        }
    }

    public struct RevenueRow: Sendable, Equatable {
        public var segment: String
        public var currency: String
        public var subscriptions: Int
        /// Sum of renewal prices in milliunits of `currency` (Apple's `renewalPrice`).
        public var milliunits: Int64
        public init(segment: String, currency: String, subscriptions: Int, milliunits: Int64) {
            self.segment = segment
            self.currency = currency
            self.subscriptions = subscriptions
            self.milliunits = milliunits
        }
    }

    public struct RunRow: Sendable, Equatable {
        public var id: Int64
        public var kind: String
        public var status: String
        public var asOf: Date
        public var due: Int
        public var polled: Int
        public var failed: Int
        /// Apple calls per endpoint, summed over the run's workers.
        public var calls: [String: Int]
        /// 429 answers; nil when no worker reported the figure.
        public var http429: Int?
        /// Seconds the run's workers were at work; nil while unknown.
        public var durationSeconds: Double?
        public init(id: Int64, kind: String, status: String, asOf: Date, due: Int, polled: Int, failed: Int,
                    calls: [String: Int], http429: Int?, durationSeconds: Double?) {
            self.id = id
            self.kind = kind
            self.status = status
            self.asOf = asOf
            self.due = due
            self.polled = polled
            self.failed = failed
            self.calls = calls
            self.http429 = http429
            self.durationSeconds = durationSeconds
        }
    }

    /// One webhook endpoint: what it was sent in the window, what waits, what died.
    public struct WebhookRow: Sendable, Equatable {
        public var endpoint: String
        public var url: String
        public var enabled: Bool
        public var failing: Bool
        public var delivered: Int
        public var pending: Int
        /// Seconds since the oldest waiting delivery's message was written (as of the report).
        public var oldestPendingSeconds: Double?
        public var dead: Int
        public var lastError: String?
        public init(endpoint: String, url: String, enabled: Bool, failing: Bool, delivered: Int, pending: Int,
                    oldestPendingSeconds: Double?, dead: Int, lastError: String?) {
            (self.endpoint, self.url, self.enabled, self.failing) = (endpoint, url, enabled, failing)
            (self.delivered, self.pending, self.oldestPendingSeconds, self.dead, self.lastError) = (delivered, pending, oldestPendingSeconds, dead, lastError)
        }
    }
}
