import Foundation

/// The report as one self-contained HTML page: inline CSS and SVG, no script, no font or image
/// from anywhere. A pure function of `ReportData`.
public enum ReportPage {
    /// The panels, in page order: (anchor id, heading).
    public static let panels: [(id: String, title: String)] = [
        ("segments", "Segment sizes"),
        ("events", "Events per day"),
        ("flows", "Moves between segments"),
        ("billing", "Billing trouble"),
        ("winback", "Win-back queue"),
        ("revenue", "Revenue at risk"),
        ("refunds", "Refund requests"),
        ("cancel", "Cancel page"),
        ("experiments", "Experiments"),
        ("webhooks", "Webhooks"),
        ("runs", "The last runs"),
    ]

    public static func render(_ data: ReportData) -> String {
        let meta: HTML = """
            As of <strong>\(Format.time(data.asOf))</strong> · the last \(days(data)) · \
            \(Format.count(data.subscriptions)) subscriptions registered
            """
        return document(data, meta: meta, body: body(data, .single), css: Style.css)
    }

    /// One app's panels (or the notice that it has nothing to show), their ids from `ids`.
    static func body(_ data: ReportData, _ ids: Anchors) -> HTML {
        if !data.migrated {
            return notice("This database has no churnwatch schema yet.",
                          "Run <code>churnwatch migrate</code>, then <code>churnwatch import</code> and a first <code>churnwatch run</code>; the next report will show them.", ids)
        }
        if data.isEmpty {
            return notice("Nothing to report yet: no subscriptions, no runs, no history.",
                          "Register subscriptions (<code>churnwatch import</code>) and run a night (<code>churnwatch run</code>); segment sizes and events appear after the first run.", ids)
        }
        let nav = panels.map { p -> HTML in "<li><a href=\"#\(ids(p.id))\">\(p.title)</a></li>" }
        return """
            <nav aria-label="\(ids.panelsLabel)"><ul>\(nav)</ul></nav>
            \(SegmentsPanel.render(data, ids))
            \(EventsPanel.render(data, ids))
            \(FlowsPanel.render(data, ids))
            \(BillingPanel.render(data, ids))
            \(WinbackPanel.render(data, ids))
            \(RevenuePanel.render(data, ids))
            \(RefundsPanel.render(data, ids))
            \(CancelPagePanel.render(data, ids))
            \(ExperimentsPanel.render(data, ids))
            \(WebhooksPanel.render(data, ids))
            \(RunsPanel.render(data, ids))
            """
    }

    /// "7 days", "1 day".
    static func days(_ data: ReportData) -> String { "\(data.days) day\(data.days == 1 ? "" : "s")" }

    /// The whole page around `body`: head, style, header with `meta`, footer.
    static func document(_ data: ReportData, meta: HTML, body: HTML, css: String) -> String {
        let title = "churnwatch report, \(Format.time(data.asOf))"
        let page: HTML = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="generator" content="churnwatch report">
            <title>\(title)</title>
            <style>\(HTML(trusted: css))</style>
            </head><body><main>
            <header><h1>Subscriber churn: the morning report</h1>
            <p class="meta">\(meta)</p></header>
            \(body)
            <footer><p>Written by <code>churnwatch report</code> from the churnwatch tables in PostgreSQL. \
            Every chart's numbers are in the table under it. Days are UTC.</p></footer>
            </main></body></html>

            """
        return page.markup
    }

    static func notice(_ headline: String, _ advice: String, _ ids: Anchors) -> HTML {
        """
        <section class="panel empty" id="\(ids("empty"))" data-panel="empty"><h2>\(headline)</h2><p>\(HTML(trusted: advice))</p></section>
        """
    }

    /// A panel: heading, a one-line reading of it, then charts and tables.
    static func panel(_ id: String, _ ids: Anchors, lead: HTML, _ content: HTML) -> HTML {
        let title = panels.first { $0.id == id }?.title ?? id
        return """
            <section class="panel" id="\(ids(id))" data-panel="\(id)"><h2>\(title)</h2><p class="lead">\(lead)</p>\(content)</section>
            """
    }

    /// The line a panel shows instead of a chart when it has nothing to draw.
    static func nothing(_ text: HTML) -> HTML { "<p class=\"nothing\">\(text)</p>" }

    /// Every day of the report's window, oldest first, ending with the as-of day.
    static func windowDays(_ data: ReportData) -> [String] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let last = calendar.startOfDay(for: data.asOf)
        return (0..<max(data.days, 1)).reversed().map { back in
            let d = calendar.date(byAdding: .day, value: -back, to: last)!
            let c = calendar.dateComponents([.year, .month, .day], from: d)
            return String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0)
        }
    }

    /// `11-21` for `2026-11-21`: short axis labels.
    static func shortDay(_ day: String) -> String { day.count == 10 ? String(day.suffix(5)) : day }
}
