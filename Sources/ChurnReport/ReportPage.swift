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
        ("runs", "The last runs"),
    ]

    public static func render(_ data: ReportData) -> String {
        let title = "churnwatch report, \(Format.time(data.asOf))"
        let body: HTML
        if !data.migrated {
            body = notice("This database has no churnwatch schema yet.",
                          "Run <code>churnwatch migrate</code>, then <code>churnwatch import</code> and a first <code>churnwatch run</code>; the next report will show them.")
        } else if data.isEmpty {
            body = notice("Nothing to report yet: no subscriptions, no runs, no history.",
                          "Register subscriptions (<code>churnwatch import</code>) and run a night (<code>churnwatch run</code>); segment sizes and events appear after the first run.")
        } else {
            let nav = panels.map { p -> HTML in "<li><a href=\"#\(p.id)\">\(p.title)</a></li>" }
            body = """
                <nav aria-label="Panels"><ul>\(nav)</ul></nav>
                \(SegmentsPanel.render(data))
                \(EventsPanel.render(data))
                \(FlowsPanel.render(data))
                \(BillingPanel.render(data))
                \(WinbackPanel.render(data))
                \(RevenuePanel.render(data))
                \(RefundsPanel.render(data))
                \(RunsPanel.render(data))
                """
        }
        let page: HTML = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="generator" content="churnwatch report">
            <title>\(title)</title>
            <style>\(HTML(trusted: Style.css))</style>
            </head><body><main>
            <header><h1>Subscriber churn: the morning report</h1>
            <p class="meta">As of <strong>\(Format.time(data.asOf))</strong> · the last \(data.days) day\(data.days == 1 ? "" : "s") · \
            \(Format.count(data.subscriptions)) subscriptions registered</p></header>
            \(body)
            <footer><p>Written by <code>churnwatch report</code> from the churnwatch tables in PostgreSQL. \
            Every chart's numbers are in the table under it. Days are UTC.</p></footer>
            </main></body></html>

            """
        return page.markup
    }

    static func notice(_ headline: String, _ advice: String) -> HTML {
        """
        <section class="panel empty" id="empty" data-panel="empty"><h2>\(headline)</h2><p>\(HTML(trusted: advice))</p></section>
        """
    }

    /// A panel: heading, a one-line reading of it, then charts and tables.
    static func panel(_ id: String, lead: HTML, _ content: HTML) -> HTML {
        let title = panels.first { $0.id == id }?.title ?? id
        return """
            <section class="panel" id="\(id)" data-panel="\(id)"><h2>\(title)</h2><p class="lead">\(lead)</p>\(content)</section>
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
