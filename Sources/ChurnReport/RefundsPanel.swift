import ChurnModel

/// Panel 8: Apple's refund requests in the window: answered in time or not, and what Apple
/// decided, by the policy's branch (docs/contracts.md "Refund requests").
enum RefundsPanel {
    static let colors = [("refunded", "#CC6677"), ("declined", "#44AA99"), ("undecided", "#DDDDDD")]

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let r = data.refunds
        guard r.requests > 0 else {
            return ReportPage.panel("refunds", ids, lead: "No refund request in the last \(String(data.days)) days.", ReportPage.nothing(
                "Apple's CONSUMPTION_REQUEST notifications appear here once the change feed reads one; churnwatch answers them for customers with consent."))
        }
        let rows = r.byBranch
        let series = [
            Series(name: "refunded", color: colors[0].1, values: rows.map { Double($0.refunded) }),
            Series(name: "declined", color: colors[1].1, values: rows.map { Double($0.declined) }),
            Series(name: "undecided", color: colors[2].1, values: rows.map { Double(max($0.requests - $0.refunded - $0.declined, 0)) }),
        ]
        let chart = Chart.horizontalBars(labels: rows.map(\.branch), series: series, stacked: true,
                                         label: "Refund requests per policy branch, by Apple's decision")
        var table = Table(id: ids("t-refunds"), caption: "Refund requests signed in the window, per policy branch (pending: not answered yet)",
                          headers: ["branch", "requests", "refunded", "declined", "undecided"])
        for b in rows {
            table.add(b.branch, [Format.count(b.requests), Format.count(b.refunded), Format.count(b.declined),
                                 Format.count(max(b.requests - b.refunded - b.declined, 0))])
        }
        let (refunded, declined) = (r.refunded, r.declined)
        table.footer = ("total", [Format.count(r.requests), Format.count(refunded), Format.count(declined),
                                  Format.count(max(r.requests - refunded - declined, 0))])
        let lead: HTML = """
            \(Format.count(r.requests)) refund requests: \(Format.count(r.answeredInTime)) answered in time, \(Format.count(r.notSent)) not sent \
            (no consent, or past the deadline), \(Format.count(r.failed)) refused by Apple, \(Format.count(r.open)) open; \
            Apple refunded \(Format.count(refunded)) and declined \(Format.count(declined)).
            """
        return ReportPage.panel("refunds", ids, lead: lead, "\(chart)\(Chart.legend(colors))\(table.html)")
    }
}
