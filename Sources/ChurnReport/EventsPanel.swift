import ChurnModel

/// Panel 2: events per day by kind (by the night that detected them), and the auto-renew flips:
/// switched off, switched back on, and their net.
enum EventsPanel {
    static let off = ChurnEventType.autoRenewDisabled.rawValue
    static let on = ChurnEventType.autoRenewEnabled.rawValue

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let days = ReportPage.windowDays(data)
        var byDay: [String: [String: Int]] = [:]
        for e in data.events { byDay[e.day, default: [:]][e.event, default: 0] += e.count }
        let known = ChurnEventType.allCases.map(\.rawValue)
        let present = Set(data.events.map(\.event))
        let kinds = known.filter(present.contains) + present.subtracting(known).sorted()
        let total = data.events.reduce(0) { $0 + $1.count }
        guard total > 0 else {
            return ReportPage.panel("events", ids, lead: "No events detected in these \(data.days) days.",
                                    ReportPage.nothing("The first night a subscription is polled sets its baseline and writes no events."))
        }
        let labels = days.map(ReportPage.shortDay)
        var families = Palette.eventFamilies.map { f in
            Series(name: f.name, color: f.color, values: days.map { d in Double(f.events.reduce(0) { $0 + (byDay[d]?[$1] ?? 0) }) })
        }
        let others = kinds.filter { Palette.family(of: $0) == "other" }
        if !others.isEmpty {
            families.append(Series(name: "other", color: Palette.other,
                                   values: days.map { d in Double(others.reduce(0) { $0 + (byDay[d]?[$1] ?? 0) }) }))
        }
        families = families.filter { $0.values.contains { $0 > 0 } }
        let eventsChart = Chart.stackedBars(Frame(width: 720, height: 220), categories: labels, series: families,
                                            label: "Events per day, by family of kinds")
        let offs = days.map { byDay[$0]?[off] ?? 0 }, ons = days.map { byDay[$0]?[on] ?? 0 }
        let flipsChart = Chart.divergingBars(Frame(width: 720, height: 200), categories: labels,
                                             up: Series(name: "auto-renew back on", color: "#88CCEE", values: ons.map(Double.init)),
                                             down: Series(name: "auto-renew off", color: "#CC6677", values: offs.map(Double.init)),
                                             label: "Auto-renew switched back on (up) and off (down) per day, net as a diamond")
        var table = Table(id: ids("t-events"), caption: "Events per day and kind (the charts' numbers)", headers: ["day"] + kinds + ["total"])
        for d in days.reversed() {
            let row = kinds.map { byDay[d]?[$0] ?? 0 }
            table.add(d, row.map(Format.count) + [Format.count(row.reduce(0, +))])
        }
        table.footer = ("total", kinds.map { k in Format.count(data.events.filter { $0.event == k }.reduce(0) { $0 + $1.count }) } + [Format.count(total)])
        var flips = Table(id: ids("t-flips"), caption: "Auto-renew flips per day", headers: ["day", "off", "back on", "net"])
        for (i, d) in days.enumerated().reversed() {
            flips.add(d, [Format.count(offs[i]), Format.count(ons[i]), Format.change(ons[i] - offs[i])])
        }
        let offTotal = offs.reduce(0, +), onTotal = ons.reduce(0, +)
        flips.footer = ("total", [Format.count(offTotal), Format.count(onTotal), Format.change(onTotal - offTotal)])
        let lead: HTML = """
            \(Format.count(total)) events in \(data.days) days; auto-renew switched off \(Format.count(offTotal)) times and back \
            on \(Format.count(onTotal)) times (net \(Format.change(onTotal - offTotal))).
            """
        return ReportPage.panel("events", ids, lead: lead, """
            \(eventsChart)\(Chart.legend(families.map { ($0.name, $0.color) }))\(table.html)\
            <h3>Auto-renew flips</h3>\(flipsChart)\
            \(Chart.legend([("auto-renew back on", "#88CCEE"), ("auto-renew off", "#CC6677"), ("net (diamond)", "#ffffff")]))\(flips.html)
            """)
    }
}
