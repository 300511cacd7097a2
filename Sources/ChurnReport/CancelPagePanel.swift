import ChurnModel

/// Panel 9: the cancel page (`churnwatch serve`'s answers to Apple's Get Retention Message):
/// views in the window by arm and what was shown, and what the rules' answers saved against the
/// holdout (docs/contracts.md "The cancel page").
enum CancelPagePanel {
    static let shownOrder = ["message", "alternate_product", "promotional_offer", "default", "none"]
    /// Colour-blind-safe (Tol's muted), the default messages grey.
    static let colors = ["message": "#332288", "alternate_product": "#44AA99", "promotional_offer": "#CC6677",
                         "default": "#DDDDDD", "none": "#BBBBBB"]

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let views = data.cancelViews
        let total = views.reduce(0) { $0 + $1.count }
        let outcomes = outcomesTable(data.cancelOutcomes, ids)
        guard total > 0 else {
            return ReportPage.panel("cancel", ids, lead: "No cancel-page view in the last \(String(data.days)) days.", ReportPage.nothing(
                "Views appear here once Apple calls churnwatch serve's Get Retention Message URL (the runbook's \"The cancel page\").") + outcomes)
        }
        let arms = ["treated", "holdout", "no_rule"].filter { a in views.contains { $0.arm == a } }
        let shown = shownOrder + Set(views.map(\.shown)).subtracting(shownOrder).sorted()
        var table = Table(id: ids("t-cancel"), caption: "Cancel-page views in the window, by arm and what was shown",
                          headers: ["arm"] + shown + ["total"])
        for arm in arms {
            let row = shown.map { s in views.filter { $0.arm == arm && $0.shown == s }.reduce(0) { $0 + $1.count } }
            table.add(arm, row.map(Format.count) + [Format.count(row.reduce(0, +))])
        }
        let series = shown.map { s in
            Series(name: s, color: colors[s] ?? Palette.other,
                   values: arms.map { a in Double(views.filter { $0.arm == a && $0.shown == s }.reduce(0) { $0 + $1.count }) })
        }
        let chart = Chart.horizontalBars(labels: arms, series: series, stacked: true, label: "Cancel-page views per arm, by what was shown")
        let treated = views.filter { $0.arm == "treated" }.reduce(0) { $0 + $1.count }
        let held = views.filter { $0.arm == "holdout" }.reduce(0) { $0 + $1.count }
        let lead: HTML = """
            \(Format.count(total)) views of the subscription page: \(Format.count(treated)) shown a rule's answer, \
            \(Format.count(held)) held out (shown the default message), \(Format.count(total - treated - held)) matched no rule. \
            \(Format.count(data.cancelViewers)) subscribers viewed it last in the window; \(Format.count(data.cancelViewersStillRenewing)) \
            of them still renew (auto-renew on, not churned).
            """
        return ReportPage.panel("cancel", ids, lead: lead, "\(chart)\(Chart.legend(series.map { ($0.name, $0.color) }))\(table.html)\(outcomes)")
    }

    static func outcomesTable(_ outcomes: [ReportData.Outcome], _ ids: Anchors) -> HTML {
        guard !outcomes.isEmpty else { return "" }
        var table = Table(id: ids("t-cancel-outcomes"), caption: "What the answers saved: subscribers treated against the holdout, per kind of answer",
                          headers: ["answer", "treated", "saved share", "holdout", "holdout saved share", "uplift [95 % interval]", "revenue kept"])
        for o in outcomes {
            let treated = o.decided > 0 ? Double(o.saved) / Double(o.decided) : nil
            let held = o.holdoutDecided > 0 ? Double(o.holdoutSaved) / Double(o.holdoutDecided) : nil
            table.add(o.offerId ?? "–", [Format.count(o.entries), Format.percent(treated), Format.count(o.holdoutEntries),
                                         Format.percent(held), WinbackOutcomes.uplift(o), WinbackOutcomes.revenue(o.revenueKept)])
        }
        return """
            <h3>Outcomes</h3>\(table.html)<p class="meta">Saved: the subscription renewed past the period it was in at the view \
            (35 days on when that period had ended); each subscriber's first view a rule matched. Uplift as in the win-back outcomes.</p>
            """
    }
}
