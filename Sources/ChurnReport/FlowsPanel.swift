import ChurnModel

/// Panel 3: moves between segments over the last 7 and 30 days (from → to), with who moved into
/// `will_not_renew` and who came back to `active`.
enum FlowsPanel {
    /// Segments a subscription "comes back" from when it moves to `active`.
    static let lost: Set<String> = Set([
        Segment.willNotRenew, .gracePeriod, .billingRetry, .churnedVoluntary, .churnedBilling, .churnedPriceIncrease,
        .churnedProductUnavailable, .churnedOther, .refunded,
    ].map(\.rawValue))

    static let chartRows = 12

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let flows = data.flows.sorted { ($0.last30, $0.last7, $1.from, $1.to) > ($1.last30, $1.last7, $0.from, $0.to) }
        guard !flows.isEmpty else {
            return ReportPage.panel("flows", ids, lead: "No subscription changed segment in the last 30 days.",
                                    ReportPage.nothing("Moves are recorded as runs change segments (from migration 0009 on)."))
        }
        let into = flows.filter { $0.to == Segment.willNotRenew.rawValue }
        let back = flows.filter { $0.to == Segment.active.rawValue && lost.contains($0.from) }
        func sum(_ f: [ReportData.Flow], _ k: KeyPath<ReportData.Flow, Int>) -> String { Format.count(f.reduce(0) { $0 + $1[keyPath: k] }) }
        let lead: HTML = """
            Into will_not_renew: \(sum(into, \.last7)) in 7 days, \(sum(into, \.last30)) in 30 days. \
            Came back to active (from will_not_renew, billing trouble, churned or refunded): \(sum(back, \.last7)) in 7 days, \
            \(sum(back, \.last30)) in 30 days.
            """
        let top = Array(flows.prefix(chartRows))
        let chart = Chart.horizontalBars(labels: top.map { "\($0.from) → \($0.to)" },
                                         series: [Series(name: "last 7 days", color: "#332288", values: top.map { Double($0.last7) }),
                                                  Series(name: "last 30 days", color: "#88CCEE", values: top.map { Double($0.last30) })],
                                         stacked: false, label: "The most frequent moves between segments, last 7 and 30 days")
        var table = Table(id: ids("t-flows"), caption: "Moves between segments (from → to)", headers: ["from → to", "last 7 days", "last 30 days"])
        for f in flows { table.add("\(f.from) → \(f.to)", [Format.count(f.last7), Format.count(f.last30)]) }
        table.footer = ("total", [sum(flows, \.last7), sum(flows, \.last30)])
        let note: HTML = flows.count > chartRows ? "<p class=\"lead\">The chart shows the \(chartRows) most frequent moves; the table has all \(flows.count).</p>" : ""
        return ReportPage.panel("flows", ids, lead: lead, """
            \(chart)\(Chart.legend([("last 7 days", "#332288"), ("last 30 days", "#88CCEE")]))\(note)\(table.html)
            """)
    }
}
