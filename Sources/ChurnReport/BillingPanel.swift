/// Panel 4: billing trouble now, and the share of billing-trouble episodes recovered by day since
/// the first failure (WWDC 2018 session 705: the curve to watch when choosing a grace period).
enum BillingPanel {
    /// Days with fewer episodes old enough are not drawn.
    static let minimumEpisodes = 10

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let b = data.billing
        let kpis: HTML = """
            <ul class="kpis"><li><b>\(Format.count(b.inGrace))</b><span>in grace period (still have access)</span></li>\
            <li><b>\(Format.count(b.inRetry))</b><span>in billing retry (no access)</span></li>\
            <li><b>\(Format.count(b.recovery.first?.observed ?? 0))</b><span>episodes began in \(data.days) days</span></li></ul>
            """
        let points = b.recovery.filter { $0.observed > 0 }
        guard !points.isEmpty else {
            return ReportPage.panel("billing", ids, lead: "No billing trouble began in these \(data.days) days.", kpis
                                    + ReportPage.nothing("An episode starts with billing_retry_started or grace_period_started and ends with billing_recovered or an expiry."))
        }
        let labels = b.recovery.map { "day \($0.day)" }
        // A share of a handful of episodes is noise: the chart leaves such days out, the table has them.
        let chart = Chart.shareLine(Frame(width: 720, height: 220), categories: labels,
                                    shares: b.recovery.map { $0.observed >= Self.minimumEpisodes ? $0.share : nil },
                                    color: "#AA4499", label: "Share of billing-trouble episodes recovered, by day since the first failure")
        var table = Table(id: ids("t-billing"), caption: "Recovered by day since the first failure (episodes at least that old)",
                          headers: ["days since failure", "episodes", "recovered", "share"])
        for p in b.recovery {
            table.add(String(p.day), [Format.count(p.observed), Format.count(p.recovered), Format.percent(p.share)])
        }
        let lead: HTML
        if let week = b.recovery.first(where: { $0.day == 7 && $0.observed > 0 }) {
            lead = "\(Format.percent(week.share)) of the episodes at least a week old had recovered within 7 days; \(Format.count(b.inGrace + b.inRetry)) subscribers are in billing trouble now."
        } else {
            lead = "\(Format.count(b.inGrace + b.inRetry)) subscribers are in billing trouble now; the curve grows as episodes age."
        }
        return ReportPage.panel("billing", ids, lead: lead, """
            \(kpis)\(chart)\(Chart.legend([("share recovered (days with at least \(Self.minimumEpisodes) episodes that old)", "#AA4499")]))\(table.html)
            """)
    }
}
