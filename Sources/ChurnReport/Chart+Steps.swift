import Foundation

extension Chart {
    /// One step of `stackedSteps`: from `at` (until the next step, or the end), each series' share.
    struct Step: Sendable, Equatable {
        var at: Date
        var shares: [Double]
        /// Said in each shape's tooltip ("period 2").
        var name: String
    }

    /// Shares over time stacked to 100 %, constant between steps: one rectangle per step and
    /// series, its left edge at the step's time (a time axis from `start` to `end`). A step's
    /// shares are normalized to sum 1. The last step lasts until `until` (a stop; default `end`),
    /// marked by a vertical line when before `end`.
    static func stackedSteps(_ frame: Frame, start: Date, end: Date, steps: [Step], until: Date? = nil, series: [(name: String, color: String)],
                             label: String) -> HTML {
        let span = max(end.timeIntervalSince(start), 1)
        func x(_ t: Date) -> Double { frame.left + frame.plotWidth * min(max(t.timeIntervalSince(start) / span, 0), 1) }
        let last = until.map { min($0, end) } ?? end
        var shapes: [HTML] = []
        for (k, step) in steps.enumerated() {
            let x0 = x(step.at), x1 = x(k + 1 < steps.count ? steps[k + 1].at : last)
            guard x1 > x0 else { continue }
            let total = step.shares.reduce(0) { $0 + max($1, 0) }
            var below = 0.0
            for (i, s) in series.enumerated() {
                let share = total > 0 ? max(step.shares[safe: i] ?? 0, 0) / total : 0
                guard share > 0 else { continue }
                let top = frame.y(below + share, maximum: 1), bottom = frame.y(below, maximum: 1)
                shapes.append("""
                    <rect fill="\(s.color)" stroke="#ffffff" stroke-width="0.5" x="\(x0)" y="\(top)" width="\(x1 - x0)" height="\(bottom - top)">\
                    <title>\(s.name), \(step.name) from \(Format.time(step.at)): \(Format.percent(share))</title></rect>
                    """)
                below += share
            }
        }
        if last < end {
            let xs = x(last)
            // The word in the empty part after the stop when it fits there, else before the line, haloed.
            let after = frame.left + frame.plotWidth - xs > 60
            shapes.append("""
                <line class="zero" stroke-dasharray="4 3" x1="\(xs)" y1="\(frame.top)" x2="\(xs)" y2="\(frame.baseline)"/>\
                <text class="axis" x="\(after ? xs + 4 : xs - 4)" y="\(frame.top + 14)" text-anchor="\(after ? "start" : "end")" \
                paint-order="stroke" stroke="#ffffff" stroke-width="3">stopped</text>
                """)
        }
        return svg(frame, label: label, yAxis(frame, maximum: 1, format: { String(Int(($0 * 100).rounded())) + " %" }) + shapes.joined()
                   + timeLabels(frame, start: start, end: end))
    }

    /// Labels under a time axis from `start` to `end`: at UTC midnights (`10-07`), every day or
    /// every few days (at most 7 labels), over two days or more; else five evenly spaced times
    /// (`10-07 14:00`).
    static func timeLabels(_ frame: Frame, start: Date, end: Date) -> HTML {
        let span = max(end.timeIntervalSince(start), 1)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var ticks: [(Date, String)] = []
        if span >= 2 * 86_400 {
            let step = max(1, Int((span / 86_400 / 7).rounded(.up)))
            var day = calendar.startOfDay(for: start)
            if day < start { day = calendar.date(byAdding: .day, value: 1, to: day)! }
            while day <= end {
                let c = calendar.dateComponents([.month, .day], from: day)
                ticks.append((day, String(format: "%02d-%02d", c.month ?? 0, c.day ?? 0)))
                day = calendar.date(byAdding: .day, value: step, to: day)!
            }
        } else {
            ticks = (0...4).map { i in
                let t = start.addingTimeInterval(span * Double(i) / 4)
                let c = calendar.dateComponents([.month, .day, .hour, .minute], from: t)
                return (t, String(format: "%02d-%02d %02d:%02d", c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0))
            }
        }
        return ticks.map { t, text -> HTML in
            let x = frame.left + frame.plotWidth * t.timeIntervalSince(start) / span
            // A label near an edge ends (or starts) at its point instead of running off the chart.
            let anchor = x - frame.left < 40 ? "start" : frame.left + frame.plotWidth - x < 40 ? "end" : "middle"
            return """
                <line class="grid" x1="\(x)" y1="\(frame.baseline)" x2="\(x)" y2="\(frame.baseline + 4)"/>\
                <text class="axis" x="\(x)" y="\(frame.height - 12)" text-anchor="\(anchor)">\(text)</text>
                """
        }.joined()
    }
}
