import ChurnModel
import Foundation

/// The experiments panel: per cancel-page experiment running at the as-of time or stopped in
/// the window, what it is, its weights over time, each arm against the holdout and the
/// sample-ratio check: the figures of `churnwatch outcomes --experiment NAME` (docs/churn-model.md
/// "Experiments").
enum ExperimentsPanel {
    /// One colour per arm, in the experiment's order (Tol's muted; 8 arms at most).
    static let armColors = ["#332288", "#88CCEE", "#44AA99", "#DDCC77", "#CC6677", "#AA4499", "#117733", "#882255"]
    /// The words of a sample-ratio mismatch (the same as `outcomes --experiment`'s).
    static let mismatch = "the assignment is not as intended: do not trust the estimates"
    /// A warning that stands out in any panel (the page's style sheet has no warning class).
    static let warningStyle = "color:#882255;background:#fbeef1;border-left:4px solid #CC6677;padding:4px 10px;font-weight:600"

    /// Between two experiments (the page's style sheet has no rule for them).
    static let separator: HTML = " style=\"border-top:1px solid var(--line);margin-top:14px;padding-top:2px\""

    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let rows = data.experiments
        guard !rows.isEmpty else {
            return ReportPage.panel("experiments", ids, lead: "No cancel-page experiment running or stopped in the last \(ReportPage.days(data)).",
                                    ReportPage.nothing("""
                                        Start one with <code>churnwatch experiments add NAME --rule RULE --arm ... --arm ... --holdout 0.2</code>: \
                                        its arms answer a cancel-page rule's audience, a fixed share held out, and are compared here.
                                        """))
        }
        let running = rows.filter(\.running).count
        let flagged = rows.filter(\.readout.sampleRatio.flagged).count
        let warn: HTML = flagged > 0
            ? "; <strong>\(Format.count(flagged)) with a sample-ratio mismatch</strong> (\(Self.mismatch))" : ""
        let lead: HTML = """
            \(Format.count(rows.count)) experiment\(rows.count == 1 ? "" : "s") on the cancel page: \(Format.count(running)) running, \
            \(Format.count(rows.count - running)) stopped in the last \(ReportPage.days(data))\(warn).
            """
        let blocks = rows.enumerated().map { experiment($1, number: $0 + 1, asOf: data.asOf, ids) }
        let note: HTML = """
            <p class="meta">Renewing: auto-renew still on that many hours after the first view (the metric adaptive weights follow). \
            Saved: renewed past the period of the view, over those decided. Uplift: the saved share minus the holdout's, in percentage \
            points, stratified by allocation period, with its 95 % interval. P(best): the chance the arm keeps the most revenue per \
            view. Revenue kept: uplift × exposed × (1 − discount) × the saved subscribers' mean renewal price. \
            <code>churnwatch outcomes --experiment NAME</code> prints the same.</p>
            """
        return ReportPage.panel("experiments", ids, lead: lead, blocks.joined() + note)
    }

    /// One experiment: heading, weights chart and legend, the arms' table, the sample-ratio line
    /// and the allocations' table.
    static func experiment(_ x: ExperimentReportRow, number: Int, asOf: Date, _ ids: Anchors) -> HTML {
        let arms = x.readout.arms.filter { $0.arm != ExperimentAssignment.holdout }.map(\.arm)
        let colors = arms.indices.map { armColors[$0 % armColors.count] }
        let state = x.running ? "running since \(Format.time(x.startedAt))"
            : "stopped \(x.stoppedAt.map(Format.time) ?? "") (started \(Format.time(x.startedAt)))"
        let mode = x.allocation == .adaptive ? "adaptive weights" : "fixed weights"
        let meta: HTML = """
            rule <code>\(x.rule)</code> · \(mode) · holdout \(Format.percent(x.holdout)) · \(state) · \
            \(Format.count(x.history.count)) allocation\(x.history.count == 1 ? "" : "s")
            """
        let steps = x.history.map { a in Chart.Step(at: a.at, shares: arms.map { a.weights[$0] ?? 0 }, name: "period \(a.period)") }
        let chart = Chart.stackedSteps(Frame(width: 720, height: 200), start: x.startedAt, end: asOf, steps: steps, until: x.stoppedAt,
                                       series: Array(zip(arms, colors)).map { ($0.0, $0.1) },
                                       label: "Experiment \(x.name): each arm's share of the treated over time")
        return """
            <div class="experiment" id="\(ids("experiment-\(number)"))" data-experiment="\(x.name)"\(number > 1 ? Self.separator : "")><h3>\(x.name)</h3><p class="meta">\(meta)</p>\
            \(chart)\(Chart.legend(Array(zip(arms, colors)).map { ($0.0, $0.1) }))\(armsTable(x, number: number, ids))\(sampleRatio(x))\
            \(allocationsTable(x, arms: arms, number: number, ids))</div>
            """
    }

    static func armsTable(_ x: ExperimentReportRow, number: Int, _ ids: Anchors) -> HTML {
        var table = Table(id: ids("t-experiment-\(number)"),
                          caption: "\(x.name) per arm: each subscriber once, in the arm of the first view; the holdout is shown the default",
                          headers: ["arm", "weight now", "exposed", "renewing after \(x.decisionHours) h", "decided", "saved",
                                    "uplift [95 % interval]", "P(best)", "revenue kept"])
        for a in x.readout.arms {
            let e = a.estimate
            table.add(a.arm + (a.retired ? " (retired)" : ""), [
                a.weightNow.map(Format.percent) ?? "–", Format.count(a.exposed),
                Format.percent(a.matured > 0 ? Double(a.renewing) / Double(a.matured) : nil), Format.count(a.decided),
                Format.percent(a.decided > 0 ? Double(a.saved) / Double(a.decided) : nil), uplift(e),
                e.map { Format.percent($0.probabilityBest) } ?? "–", a.revenueKept.map(WinbackOutcomes.revenue) ?? "–",
            ])
        }
        return table.html
    }

    /// `+4.2 pp [+1.0, +7.4]`; `–` for the holdout or an arm without a period decided on both sides.
    static func uplift(_ e: ArmEstimate?) -> String {
        guard let e, let u = e.uplift, let low = e.low, let high = e.high else { return "–" }
        return String(format: "%+.1f pp [%+.1f, %+.1f]", u * 100, low * 100, high * 100)
    }

    /// The sample-ratio check in one line; a mismatch in the warning style.
    static func sampleRatio(_ x: ExperimentReportRow) -> HTML {
        let s = x.readout.sampleRatio
        if s.flagged {
            let chi = s.chiSquare.isFinite ? String(format: "chi-square %.1f, %d df, ", s.chiSquare, s.degreesOfFreedom) : ""
            return """
                <p class="warning" style="\(Self.warningStyle)">Sample ratio: mismatch (\(chi)p = \(String(format: "%.2g", s.pValue))\
                \(s.worst.map { "; \($0)" } ?? "")): \(Self.mismatch).</p>
                """
        }
        guard x.readout.arms.contains(where: { $0.exposed > 0 }) else {
            return "<p class=\"meta\">Sample ratio: no exposure yet.</p>"
        }
        return """
            <p class="meta">Sample ratio: as intended (chi-square \(String(format: "%.1f", s.chiSquare)), \(s.degreesOfFreedom) df, \
            p = \(String(format: "%.3f", s.pValue))).</p>
            """
    }

    /// The chart's numbers: one row per allocation period, its weights per arm.
    static func allocationsTable(_ x: ExperimentReportRow, arms: [String], number: Int, _ ids: Anchors) -> HTML {
        var table = Table(id: ids("t-experiment-\(number)-allocations"),
                          caption: "\(x.name)'s allocations: from when, why, and each arm's share of the treated",
                          headers: ["period", "from", "reason"] + arms)
        for a in x.history {
            let reason = a.by.isEmpty ? a.reason : "\(a.reason) (\(a.by))"
            table.add(String(a.period), [Format.time(a.at), reason] + arms.map { a.weights[$0].map(Format.percent) ?? "–" })
        }
        return table.html
    }
}
