@testable import ChurnReport
import Foundation
import Testing

@Suite("report page: win-back outcomes in panel 5")
struct WinbackOutcomesTests {
    static func outcome(campaign: String = "save_offer", offer: String? = "spring50", decided: Int = 100, saved: Int = 40,
                        holdoutDecided: Int = 50, holdoutSaved: Int = 10, revenue: [String: Int64] = ["USD": 119_880, "EUR": 5_000]) -> ReportData.Outcome {
        .init(campaign: campaign, offerId: offer, entries: 120, delivered: 90, decided: decided, saved: saved,
              holdoutEntries: 55, holdoutDecided: holdoutDecided, holdoutSaved: holdoutSaved, medianDaysToSave: 3.5, revenueKept: revenue)
    }

    /// Newcombe's hybrid score interval of p1 - p2, written out here from the formula
    /// (docs/churn-model.md §6), not by calling the code under test.
    static func newcombe(_ s1: Int, _ n1: Int, _ s2: Int, _ n2: Int) -> (Double, Double, Double) {
        func wilson(_ s: Int, _ n: Int) -> (Double, Double) {
            let z = 1.959963984540054, p = Double(s) / Double(n), n = Double(n)
            let c = (p + z * z / (2 * n)) / (1 + z * z / n)
            let h = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot()
            return (c - h, c + h)
        }
        let p1 = Double(s1) / Double(n1), p2 = Double(s2) / Double(n2)
        let (l1, u1) = wilson(s1, n1), (l2, u2) = wilson(s2, n2)
        let d = p1 - p2
        return (d, d - ((p1 - l1) * (p1 - l1) + (u2 - p2) * (u2 - p2)).squareRoot(), d + ((u1 - p1) * (u1 - p1) + (p2 - l2) * (p2 - l2)).squareRoot())
    }

    @Test("a campaign and offer with outcomes: its row carries every figure, the interval in percentage points")
    func row() {
        var data = ReportFixtures.week()
        data.outcomes = [Self.outcome()]
        let page = ReportPage.render(data)
        let (d, low, high) = Self.newcombe(40, 100, 10, 50)
        #expect(low > 0.04 && high < 0.36 && low < d && d < high)
        let uplift = String(format: "%+.1f pp [%+.1f, %+.1f]", d * 100, low * 100, high * 100)
        #expect(uplift.hasPrefix("+20.0 pp [+"))
        let cells = ["spring50", "120", "90", "40.0 %", "55", "20.0 %", uplift, "3.5", "EUR 5.00, USD 119.88"]
        let expected = "<tr><th scope=\"row\">save_offer</th>" + cells.map { "<td class=\"num\">\($0)</td>" }.joined() + "</tr>"
        #expect(page.contains("<table id=\"t-outcomes\">"))
        #expect(page.contains(expected), "row missing: \(expected)")
        #expect(!page.contains("No outcomes yet"))
        #expect(!page.contains("too few to say</td>"))
    }

    @Test("small groups are flagged \"too few to say\"; a group with nothing decided has no uplift; no offer and no revenue show as such")
    func smallGroups() {
        var data = ReportFixtures.week()
        data.outcomes = [Self.outcome(decided: 12, saved: 6, holdoutDecided: 5, holdoutSaved: 1),
                         Self.outcome(campaign: "billing_fix", offer: nil, decided: 40, saved: 30, holdoutDecided: 0, holdoutSaved: 0, revenue: [:])]
        let page = ReportPage.render(data)
        let (d, low, high) = Self.newcombe(6, 12, 1, 5)
        #expect(page.contains(String(format: "<td class=\"num\">%+.1f pp [%+.1f, %+.1f] too few to say</td>", d * 100, low * 100, high * 100)))
        #expect(page.contains("<tr><th scope=\"row\">billing_fix</th><td class=\"num\">(none)</td>"))
        #expect(page.contains("<td class=\"num\">75.0 %</td><td class=\"num\">55</td><td class=\"num\">–</td><td class=\"num\">–</td><td class=\"num\">3.5</td><td class=\"num\">–</td></tr>"))
    }

    @Test("hostile campaign, offer and currency strings from the database are escaped in the outcomes table")
    func hostile() {
        var data = ReportFixtures.week()
        data.outcomes = [Self.outcome(campaign: ReportFixtures.hostile, offer: ReportFixtures.hostile, revenue: [ReportFixtures.hostile: 1_000])]
        let page = ReportPage.render(data)
        #expect(!page.contains("<script"))
        #expect(!page.contains(ReportFixtures.hostile))
        let escaped = HTML.escape(ReportFixtures.hostile)
        #expect(page.contains("<tr><th scope=\"row\">\(escaped)</th><td class=\"num\">\(escaped)</td>"))
        #expect(page.contains("<td class=\"num\">\(escaped) 1.00</td>"))
    }

    @Test("held_out is a status of the queue table, with its own colour, even when no entry has it")
    func heldOutColumn() {
        var data = ReportFixtures.week()
        data.winback.append(.init(campaign: "save_offer", status: "held_out", count: 7))
        let page = ReportPage.render(data)
        #expect(page.contains("<th scope=\"col\" class=\"num\">held_out</th>"))
        #expect(page.contains("<td class=\"num\">7</td><td class=\"num\">99</td></tr>"))
        #expect(ReportPage.render(ReportFixtures.week()).contains("<th scope=\"col\" class=\"num\">held_out</th>"))
        #expect(Set(Palette.winbackStatus.map(\.color)).count == Palette.winbackStatus.count)
    }
}
