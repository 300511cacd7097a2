/// Panel 6: revenue at risk per segment and currency, from the renewal prices Apple signs, when
/// churnwatch stores them.
enum RevenuePanel {
    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        guard let revenue = data.revenue, !revenue.rows.isEmpty else {
            return ReportPage.panel("revenue", ids, lead: "No prices known yet.", ReportPage.nothing("""
                Revenue at risk needs each subscription's renewal price and currency in <code>subscription_segments</code> \
                (<code>renewal_price</code>, <code>renewal_currency</code>); this database has none yet.
                """))
        }
        let rows = revenue.rows.sorted {
            (Palette.segmentOrder.firstIndex(of: $0.segment) ?? 99, $0.currency) < (Palette.segmentOrder.firstIndex(of: $1.segment) ?? 99, $1.currency)
        }
        let chart = Chart.horizontalBars(labels: rows.map { "\($0.segment) · \($0.currency)" },
                                         series: [Series(name: "renewal revenue at risk", color: "#CC6677",
                                                         values: rows.map { Double($0.milliunits) / 1000 })],
                                         stacked: false, label: "Renewal revenue at risk per segment and currency (amounts per currency are not comparable)",
                                         format: { Format.amount(milliunits: Int64(($0 * 1000).rounded()), currency: nil) })
        var table = Table(id: ids("t-revenue"), caption: "Renewal revenue at risk per segment and currency (one period's renewal prices)",
                          headers: ["segment", "currency", "subscriptions", "amount"])
        for r in rows { table.add(r.segment, [r.currency, Format.count(r.subscriptions), Format.amount(milliunits: r.milliunits, currency: r.currency)]) }
        var totals: [String: Int64] = [:]
        for r in rows { totals[r.currency, default: 0] += r.milliunits }
        let lead = totals.sorted { $0.key < $1.key }.map { "\($0.key) \(Format.amount(milliunits: $0.value, currency: $0.key))" }.joined(separator: ", ")
        return ReportPage.panel("revenue", ids, lead: "At risk at the next renewal: \(lead).", """
            \(chart)\(Chart.legend([("renewal revenue at risk (bars compare within one currency only)", "#CC6677")]))\(table.html)
            """)
    }
}
