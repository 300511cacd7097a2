import ChurnModel

/// Fixed colours, the same on every page and every night, chosen from Paul Tol's colour-blind
/// safe "muted" scheme plus greys for the segments a retention team acts on least. Colour is
/// never the only cue: every chart has a legend and a table with the same numbers.
enum Palette {
    /// One colour per segment of docs/contracts.md.
    static let segmentColors: [String: String] = [
        Segment.active.rawValue: "#44AA99",                     // teal
        Segment.planChangePending.rawValue: "#88CCEE",          // cyan
        Segment.priceIncreasePending.rawValue: "#DDCC77",       // sand
        Segment.willNotRenew.rawValue: "#CC6677",               // rose
        Segment.gracePeriod.rawValue: "#999933",                // olive
        Segment.billingRetry.rawValue: "#AA4499",               // purple
        Segment.churnedVoluntary.rawValue: "#882255",           // wine
        Segment.churnedBilling.rawValue: "#332288",             // indigo
        Segment.churnedPriceIncrease.rawValue: "#117733",       // green
        Segment.churnedProductUnavailable.rawValue: "#555555",  // dark grey
        Segment.churnedOther.rawValue: "#888888",               // grey
        Segment.refunded.rawValue: "#000000",                   // black
        Segment.unknown.rawValue: "#DDDDDD",                    // pale grey
    ]

    /// A segment this version does not know.
    static let other = "#BBBBBB"

    static func color(segment: String) -> String { segmentColors[segment] ?? other }

    /// Segments bottom to top in the stacked chart: the healthy base first, churned on top.
    static let segmentOrder: [String] = [
        Segment.active, .planChangePending, .priceIncreasePending, .willNotRenew, .gracePeriod, .billingRetry,
        .churnedVoluntary, .churnedBilling, .churnedPriceIncrease, .churnedProductUnavailable, .churnedOther,
        .refunded, .unknown,
    ].map(\.rawValue)

    /// Families of events for the events chart (every kind stays in the table).
    static let eventFamilies: [(name: String, color: String, events: [String])] = [
        ("renewals and comebacks", "#44AA99", ["renewed", "resubscribed", "billing_recovered", "refund_reversed"]),
        ("auto-renew off", "#CC6677", ["auto_renew_disabled"]),
        ("auto-renew on", "#88CCEE", ["auto_renew_enabled"]),
        ("billing trouble", "#AA4499", ["billing_retry_started", "grace_period_started", "grace_period_expired"]),
        ("expiries and refunds", "#332288", ["expired", "refunded"]),
        ("plan and price changes", "#DDCC77", ["plan_change_scheduled", "plan_change_cancelled", "plan_changed",
                                               "price_increase_pending", "price_increase_accepted"]),
    ]

    /// The family of an event kind ("other" for a kind this version does not know).
    static func family(of event: String) -> String {
        eventFamilies.first { $0.events.contains(event) }?.name ?? "other"
    }

    /// Win-back statuses, in queue order.
    static let winbackStatus: [(name: String, color: String)] = [
        ("pending", "#DDCC77"), ("claimed", "#88CCEE"), ("done", "#44AA99"), ("obsolete", "#888888"), ("expired", "#CC6677"), ("held_out", "#AA4499"),
    ]
}
