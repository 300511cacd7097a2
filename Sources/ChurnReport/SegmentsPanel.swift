/// Panel 1: segment sizes over the days (a stacked area from `segment_daily`) and today's change.
enum SegmentsPanel {
    /// Segments in chart order: the contract's, then any this version does not know, by name.
    static func segments(in days: [ReportData.SegmentDay]) -> [String] {
        let present = Set(days.flatMap { $0.sizes.keys })
        return Palette.segmentOrder.filter(present.contains) + present.subtracting(Palette.segmentOrder).sorted()
    }

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let days = data.segmentDays
        guard let today = days.last else {
            return ReportPage.panel("segments", ids, lead: "No segment sizes recorded in these days.",
                                    ReportPage.nothing("Each finished <code>churnwatch run</code> writes the day's sizes to <code>segment_daily</code>."))
        }
        let previous = days.count > 1 ? days[days.count - 2] : nil
        let names = segments(in: days)
        let series = names.map { name in
            Series(name: name, color: Palette.color(segment: name), values: days.map { Double($0.sizes[name] ?? 0) })
        }
        let chart = Chart.stackedArea(Frame(width: 720, height: 260), categories: days.map { ReportPage.shortDay($0.day) },
                                      series: series, label: "Subscriptions per segment, per day")
        let legend = Chart.legend(names.map { ($0, Palette.color(segment: $0)) })

        var todayTable = Table(id: ids("t-segments-today"), caption: "Subscriptions per segment on \(today.day)"
                               + (previous.map { ", change since \($0.day)" } ?? ""),
                               headers: ["segment", "subscriptions", "change"])
        for name in names {
            let n = today.sizes[name] ?? 0
            todayTable.add(name, [Format.count(n), previous.map { Format.change(n - ($0.sizes[name] ?? 0)) } ?? "–"])
        }
        todayTable.footer = ("total", [Format.count(today.total), previous.map { Format.change(today.total - $0.total) } ?? "–"])

        var history = Table(id: ids("t-segments-days"), caption: "Subscriptions per segment and day (the chart's numbers)",
                            headers: ["day"] + names + ["total"])
        for day in days.reversed() {
            history.add(day.day, names.map { Format.count(day.sizes[$0] ?? 0) } + [Format.count(day.total)])
        }

        var products = Table(id: ids("t-segments-products"), caption: "Subscriptions per segment and product on \(today.day)",
                             headers: ["segment", "product", "subscriptions"])
        for p in data.segmentProducts {
            products.add(p.segment, [p.productId.isEmpty ? "(not polled yet)" : p.productId, Format.count(p.subscriptions)])
        }
        let lead = movers(today: today, previous: previous, names: names)
        return ReportPage.panel("segments", ids, lead: lead, """
            \(chart)\(legend)<div class="tables"><div>\(todayTable.html)</div><div>\(products.html)</div></div>\
            <h3>Day by day</h3>\(history.html)
            """)
    }

    /// "12,345 subscriptions on 2026-11-21; will_not_renew +40, active -38 since 2026-11-20."
    static func movers(today: ReportData.SegmentDay, previous: ReportData.SegmentDay?, names: [String]) -> HTML {
        let head = "\(Format.count(today.total)) subscriptions on \(today.day)"
        guard let previous else { return "\(head); no earlier day to compare with." }
        let changes = names.map { ($0, (today.sizes[$0] ?? 0) - (previous.sizes[$0] ?? 0)) }
            .filter { $0.1 != 0 }.sorted { abs($0.1) > abs($1.1) }.prefix(4)
        if changes.isEmpty { return "\(head); no segment changed size since \(previous.day)." }
        let text = changes.map { "\($0.0) \(Format.change($0.1))" }.joined(separator: ", ")
        return "\(head); biggest changes since \(previous.day): \(text)."
    }
}
