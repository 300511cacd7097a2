import ChurnModel
import Foundation

/// The webhooks panel: per endpoint of the app, what it was sent in the window, what waits for it
/// and for how long, what died after the last retry (docs/webhooks.md).
enum WebhooksPanel {
    static let colors = [("delivered", "#44AA99"), ("waiting", "#DDCC77"), ("dead", "#CC6677")]

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let rows = data.webhooks
        guard !rows.isEmpty else {
            return ReportPage.panel("webhooks", ids, lead: "No webhook endpoint.", ReportPage.nothing(
                "Add one with <code>churnwatch webhooks add NAME --url URL</code>: events, segment moves, cancel-page views and ready win-back entries are then pushed to it within seconds (runbook: Webhooks)."))
        }
        let series = [
            Series(name: "delivered", color: colors[0].1, values: rows.map { Double($0.delivered) }),
            Series(name: "waiting", color: colors[1].1, values: rows.map { Double($0.pending) }),
            Series(name: "dead", color: colors[2].1, values: rows.map { Double($0.dead) }),
        ]
        let chart = Chart.horizontalBars(labels: rows.map(\.endpoint), series: series, stacked: true,
                                         label: "Webhook deliveries per endpoint: delivered in the window, waiting and dead now")
        // The host only: an endpoint's path or query often carries its own secret token.
        var table = Table(id: ids("t-webhooks"), caption: "Per endpoint: delivered in the window; waiting and dead now",
                          headers: ["endpoint", "host", "state", "delivered", "waiting", "oldest waiting", "dead", "last error"])
        for r in rows {
            let state = !r.enabled ? "disabled" : r.failing ? "failing" : "up"
            table.add(r.endpoint, [URLComponents(string: r.url)?.host ?? "?", state, Format.count(r.delivered), Format.count(r.pending),
                                   r.oldestPendingSeconds.map(Self.age) ?? "–", Format.count(r.dead), String((r.lastError ?? "").prefix(120))])
        }
        let delivered = rows.reduce(0) { $0 + $1.delivered }, waiting = rows.reduce(0) { $0 + $1.pending }
        let dead = rows.reduce(0) { $0 + $1.dead }
        let down = rows.filter { !$0.enabled || $0.failing }.count
        let unwell = down > 0 ? "; \(down) endpoint\(down == 1 ? "" : "s") failing or disabled" : ""
        let lead: HTML = """
            \(Format.count(delivered)) messages delivered to \(Format.count(rows.count)) endpoints in the last \(ReportPage.days(data)); \
            \(Format.count(waiting)) waiting, \(Format.count(dead)) dead (<code>churnwatch webhooks replay</code> sends them again)\(unwell).
            """
        return ReportPage.panel("webhooks", ids, lead: lead, "\(chart)\(Chart.legend(colors))\(table.html)")
    }

    /// "42 s", "17 min", "5.2 h", "3.0 days".
    static func age(_ seconds: Double) -> String {
        switch seconds {
        case ..<120: "\(Int(seconds.rounded())) s"
        case ..<7_200: "\(Int((seconds / 60).rounded())) min"
        case ..<172_800: String(format: "%.1f h", seconds / 3_600)
        default: String(format: "%.1f days", seconds / 86_400)
        }
    }
}
