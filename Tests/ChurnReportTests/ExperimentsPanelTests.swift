@testable import ChurnReport
import ChurnModel
import Foundation
import Testing

@Suite("report: the experiments panel")
struct ExperimentsPanelTests {
    static func panel(_ data: ReportData) -> String { ExperimentsPanel.render(data).markup }

    /// The `x` of every rectangle in `svg`.
    static func rectXs(_ svg: String) -> [Double] {
        let pattern = try! NSRegularExpression(pattern: #"<rect [^>]*\bx="([^"]*)""#)
        return pattern.matches(in: svg, range: NSRange(svg.startIndex..., in: svg)).compactMap {
            Double(String(svg[Range($0.range(at: 1), in: svg)!]))
        }
    }

    @Test("an experiment: heading (rule, adaptive, holdout, running), a legend entry per arm, a row per arm and the holdout with weight, exposed, renewing, saved, uplift, P(best) and revenue kept; in the page after the cancel page")
    func arms() throws {
        let data = ReportFixtures.week()
        let html = Self.panel(data)
        #expect(html.contains("<h3>save_offers</h3>"))
        #expect(html.contains("rule <code>at_risk</code> · adaptive weights · holdout 20.0 % · running since 2026-10-01 02:00 UTC · 3 allocations"))
        #expect(html.contains("1 experiment on the cancel page: 1 running, 0 stopped in the last 7 days."))
        for (arm, color) in zip(["message", "half", "annual"], ExperimentsPanel.armColors) {
            #expect(html.contains("<li><span class=\"swatch\" style=\"background:\(color)\"></span>\(arm)</li>"), "legend \(arm)")
        }
        // half: weight 0.8 now; exposed 80 + 120 + 64; renewing 42 + 63 + 33 of 60 + 90 + 48 matured; saved 26 + 33 of 160 decided.
        #expect(html.contains("<th scope=\"row\">half</th><td class=\"num\">80.0 %</td><td class=\"num\">264</td><td class=\"num\">69.7 %</td><td class=\"num\">160</td><td class=\"num\">36.9 %</td>"),
                "\(html.components(separatedBy: "<th scope=\"row\">half").dropFirst().first?.prefix(400) ?? "")")
        #expect(html.contains("<th scope=\"row\">holdout</th><td class=\"num\">–</td><td class=\"num\">130</td>"))
        let half = try #require(data.experiments[0].readout.arms.first { $0.arm == "half" })
        let e = try #require(half.estimate)
        #expect(html.contains(ExperimentsPanel.uplift(e)) && ExperimentsPanel.uplift(e).hasSuffix("]") && ExperimentsPanel.uplift(e).contains(" pp ["))
        #expect(html.contains("<td class=\"num\">\(Format.percent(e.probabilityBest))</td>"))
        #expect(html.contains("<td class=\"num\">\(WinbackOutcomes.revenue(try #require(half.revenueKept)))</td>"))
        // The allocations' table: one row per period with its reason and weights.
        #expect(html.contains("<th scope=\"row\">1</th><td class=\"num\">2026-10-04 02:00 UTC</td><td class=\"num\">reallocated (experiments update)</td><td class=\"num\">20.0 %</td><td class=\"num\">60.0 %</td><td class=\"num\">20.0 %</td>"))
        let page = ReportPage.render(data)
        let cancel = try #require(page.range(of: "data-panel=\"cancel\"")), experiments = try #require(page.range(of: "data-panel=\"experiments\""))
        #expect(cancel.lowerBound < experiments.lowerBound && page.contains("<a href=\"#experiments\">Experiments</a>"))
    }

    @Test("the weights chart: stacked steps whose left edges are the allocations' times on an axis from the start to the as-of time, heights the weights")
    func steps() throws {
        let data = ReportFixtures.week()
        let html = Self.panel(data)
        let svg = String(try #require(html.components(separatedBy: "<svg").dropFirst().first))
        ChartGeometryTests.expectInside("<svg" + svg, "weights")
        let f = Frame(width: 720, height: 200)
        // Started 6 days before the as-of time; periods 1 and 2 began 3 and 5 days after the start.
        let edges = [f.left, f.left + f.plotWidth * 3 / 6, f.left + f.plotWidth * 5 / 6].map(HTML.number)
        #expect(Self.rectXs(svg).map(HTML.number) == edges.flatMap { [$0, $0, $0] }, "\(Self.rectXs(svg))")
        // Period 0: a third each; the first arm's band from the baseline up a third of the plot.
        let third = HTML.number(f.plotHeight / 3)
        #expect(svg.contains("x=\"\(edges[0])\" y=\"\(HTML.number(f.baseline - f.plotHeight / 3))\" width=\"\(HTML.number(f.plotWidth / 2))\" height=\"\(third)\""))
        // Period 2 lasts to the right edge (the as-of time): half's band is 80 % of the plot.
        #expect(svg.contains("x=\"\(edges[2])\" y=\"\(HTML.number(f.y(0.9, maximum: 1)))\" width=\"\(HTML.number(f.plotWidth / 6))\" height=\"\(HTML.number(f.plotHeight * 0.8))\""))
        #expect(svg.contains("<title>half, period 1 from 2026-10-04 02:00 UTC: 60.0 %</title>"))
        // Days labelled at UTC midnight: the start (10-01 02:00) has none, 10-04 00:00 is 2 hours before period 1.
        #expect(!svg.contains(">10-01</text>") && svg.contains(">10-02</text>") && svg.contains(">10-07</text>"))
        #expect(svg.contains("x=\"\(HTML.number(f.left + f.plotWidth * (3 * 24 - 2) / (6 * 24)))\" y=\"188\" text-anchor=\"middle\">10-04</text>"))
        #expect(!svg.contains("stopped"))
    }

    @Test("a stopped experiment: its steps end at the stop, marked on the chart; the heading says stopped")
    func stopped() throws {
        var data = ReportFixtures.week()
        data.experiments = [ReportFixtures.experiment(stoppedDaysAgo: 0.5)]
        let html = Self.panel(data)
        #expect(html.contains("0 running, 1 stopped in the last 7 days"))
        #expect(html.contains("stopped 2026-10-06 14:00 UTC (started 2026-10-01 02:00 UTC)"))
        let f = Frame(width: 720, height: 200)
        let stop = HTML.number(f.left + f.plotWidth * 5.5 / 6)
        #expect(html.contains("x1=\"\(stop)\"") && html.contains(">stopped</text>"))
        let widths = try NSRegularExpression(pattern: #"<rect [^>]*\bx="599.33" [^>]*width="([^"]*)""#)
        let found = widths.matches(in: html, range: NSRange(html.startIndex..., in: html)).map { String(html[Range($0.range(at: 1), in: html)!]) }
        #expect(found == Array(repeating: HTML.number(f.plotWidth * 0.5 / 6), count: 3))
    }

    @Test("the sample-ratio check: as intended, a quiet line; a mismatch, the warning that the estimates are not to be trusted, in the panel's lead too")
    func sampleRatio() {
        let quiet = Self.panel(ReportFixtures.week())
        #expect(ReportFixtures.week().experiments[0].readout.sampleRatio.flagged == false)
        #expect(quiet.contains("<p class=\"meta\">Sample ratio: as intended (chi-square "))
        #expect(!quiet.contains("class=\"warning\"") && !quiet.contains(ExperimentsPanel.mismatch))
        var data = ReportFixtures.week()
        data.experiments.append(ReportFixtures.experiment(name: "skewed", flagged: true))
        #expect(data.experiments[1].readout.sampleRatio.flagged)
        let html = Self.panel(data)
        #expect(html.components(separatedBy: "class=\"warning\"").count - 1 == 1)
        #expect(html.contains("the assignment is not as intended: do not trust the estimates.</p>"))
        #expect(html.contains("1 with a sample-ratio mismatch"))
        let skewed = html.components(separatedBy: "data-experiment=\"skewed\"")[1]
        #expect(skewed.contains("class=\"warning\"") && skewed.contains("period 0, arm holdout"), "\(skewed.components(separatedBy: "Sample ratio").dropFirst().first?.prefix(300) ?? "")")
        #expect(html.contains("id=\"experiment-1\"") && html.contains("id=\"experiment-2\"") && html.contains("id=\"t-experiment-2\""))
    }

    @Test("no experiment: one line with the command that starts one")
    func empty() {
        var data = ReportFixtures.week()
        data.experiments = []
        let html = Self.panel(data)
        #expect(html.contains("No cancel-page experiment running or stopped in the last 7 days."))
        #expect(html.contains("<code>churnwatch experiments add NAME --rule RULE --arm ... --arm ... --holdout 0.2</code>"))
        #expect(!html.contains("<svg") && !html.contains("<table"))
    }

    @Test("a hostile experiment or rule name never reaches the page as markup")
    func hostile() {
        var data = ReportFixtures.week()
        data.experiments = [ReportFixtures.experiment(name: ReportFixtures.hostile, rule: ReportFixtures.hostile)]
        let page = ReportPage.render(data)
        #expect(!page.contains(ReportFixtures.hostile) && !page.contains("<script"))
        #expect(page.components(separatedBy: HTML.escape(ReportFixtures.hostile)).count - 1 >= 5)
    }
}
