import ChurnModel

/// Panel 5: the win-back queue per campaign and status (`held_out`: drawn for the holdout);
/// outcomes per campaign and offer once entries exist.
enum WinbackPanel {
    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let known = WinbackCampaign.allCases.map(\.rawValue)
        let present = Set(data.winback.map(\.campaign))
        let campaigns = known + present.subtracting(known).sorted()
        let statusNames = Palette.winbackStatus.map(\.name)
        let statuses = statusNames + Set(data.winback.map(\.status)).subtracting(statusNames).sorted()
        var counts: [String: [String: Int]] = [:]
        for w in data.winback { counts[w.campaign, default: [:]][w.status, default: 0] += w.count }
        let outcomes = WinbackOutcomes.render(data.outcomes, ids)
        let total = data.winback.reduce(0) { $0 + $1.count }
        guard total > 0 else {
            return ReportPage.panel("winback", ids, lead: "The win-back queue is empty.",
                                    ReportPage.nothing("Runs add entries when a subscription enters a segment with a campaign (docs/contracts.md).") + outcomes)
        }
        let series = statuses.map { s in
            Series(name: s, color: Palette.winbackStatus.first { $0.name == s }?.color ?? Palette.other,
                   values: campaigns.map { Double(counts[$0]?[s] ?? 0) })
        }
        let chart = Chart.horizontalBars(labels: campaigns, series: series, stacked: true,
                                         label: "Win-back entries per campaign, by status")
        var table = Table(id: ids("t-winback"), caption: "Win-back entries per campaign and status (now)", headers: ["campaign"] + statuses + ["total"])
        for c in campaigns {
            let row = statuses.map { counts[c]?[$0] ?? 0 }
            table.add(c, row.map(Format.count) + [Format.count(row.reduce(0, +))])
        }
        table.footer = ("total", statuses.map { s in Format.count(campaigns.reduce(0) { $0 + (counts[$1]?[s] ?? 0) }) } + [Format.count(total)])
        let live = data.winback.filter { $0.status == "pending" || $0.status == "claimed" }.reduce(0) { $0 + $1.count }
        return ReportPage.panel("winback", ids, lead: "\(Format.count(live)) entries are waiting for the messaging system (pending or claimed), \(Format.count(total)) in all.", """
            \(chart)\(Chart.legend(series.map { ($0.name, $0.color) }))\(table.html)\(outcomes)
            """)
    }
}
