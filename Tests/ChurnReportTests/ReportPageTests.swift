@testable import ChurnReport
import ChurnModel
import Foundation
import Testing

@Suite("report page: the pure renderer")
struct ReportPageTests {
    @Test("HTML.escape makes & < > \" ' inert; interpolating a String escapes it, interpolating HTML does not")
    func escaping() {
        #expect(HTML.escape(ReportFixtures.hostile) == "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;")
        let value = "\"><img onerror=x>"
        let html: HTML = "<td title=\"\(value)\">\(value)</td>"
        #expect(html.markup == "<td title=\"&quot;&gt;&lt;img onerror=x&gt;\">&quot;&gt;&lt;img onerror=x&gt;</td>")
        let inner: HTML = "<b>\(1234)</b>"
        let outer: HTML = "<p>\(inner)</p>"
        #expect(outer.markup == "<p><b>1234</b></p>")
    }

    @Test("a hostile product id, segment name, endpoint and currency from the database never reach the page as markup")
    func hostileValues() {
        var data = ReportFixtures.week(product: ReportFixtures.hostile, segment: ReportFixtures.hostile, endpoint: ReportFixtures.hostile)
        data.revenue = .init(rows: [.init(segment: "will_not_renew", currency: ReportFixtures.hostile, subscriptions: 1, milliunits: 9_990)])
        data.flows.append(.init(from: ReportFixtures.hostile, to: "active", last7: 1, last30: 1))
        data.winback.append(.init(campaign: ReportFixtures.hostile, status: ReportFixtures.hostile, count: 1))
        let page = ReportPage.render(data)
        #expect(!page.contains("<script"))
        #expect(!page.contains(ReportFixtures.hostile))
        #expect(!page.contains("alert(\"x\")"))
        let escaped = HTML.escape(ReportFixtures.hostile)
        // Segments (chart, legend, tables), products, flows, win-back, revenue, runs' endpoint column.
        #expect(page.components(separatedBy: escaped).count - 1 >= 8)
        #expect(page.contains("calls: \(escaped)"))
    }

    @Test("self-contained: no script, no external resource, every panel present with a chart and a table")
    func selfContained() {
        let page = ReportPage.render(ReportFixtures.week())
        for banned in ["<script", "src=", "@import", "url(", "<link", "https://"] {
            #expect(!page.contains(banned), "page contains \(banned)")
        }
        #expect(page.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "").contains("http://") == false)
        for panel in ReportPage.panels {
            let start = page.range(of: "data-panel=\"\(panel.id)\"")
            #expect(start != nil, "panel \(panel.id) missing")
            guard let start else { continue }
            let rest = page[start.upperBound...]
            let section = rest[..<(rest.range(of: "</section>")?.lowerBound ?? rest.endIndex)]
            #expect(section.contains("<table"), "panel \(panel.id) has no table")
            if panel.id != "revenue" || true { #expect(section.contains("<svg"), "panel \(panel.id) has no chart") }
        }
        #expect(page.contains("No outcomes yet"))
    }

    @Test("the cancel page: the lead counts views by arm, the table has a row per arm and a column per thing shown, the outcomes per kind of answer with the uplift; none: a line says so")
    func cancelPagePanel() {
        let page = ReportPage.render(ReportFixtures.week())
        #expect(page.contains("55 views of the subscription page: 42 shown a rule's answer, 9 held out"), "\(page.components(separatedBy: "data-panel=\"cancel\"").last?.prefix(600) ?? "")")
        #expect(page.contains("<th scope=\"row\">treated</th><td class=\"num\">12</td><td class=\"num\">0</td><td class=\"num\">30</td><td class=\"num\">0</td><td class=\"num\">0</td><td class=\"num\">42</td>"))
        #expect(page.contains("<th scope=\"row\">promotional_offer</th><td class=\"num\">60</td><td class=\"num\">32.1 %</td>"))
        var none = ReportFixtures.week()
        (none.cancelViews, none.cancelOutcomes) = ([], [])
        #expect(ReportPage.render(none).contains("No cancel-page view in the last"))
    }

    @Test("refund requests: the lead counts them and Apple's decisions, the table has a row per branch and the totals; none: a line says so")
    func refundsPanel() {
        let page = ReportPage.render(ReportFixtures.week())
        #expect(page.contains("12 refund requests: 8 answered in time, 4 not sent"))
        #expect(page.contains("Apple refunded 4 and declined 3."))
        #expect(page.contains("<th scope=\"row\">decline_consumed</th><td class=\"num\">5</td><td class=\"num\">1</td><td class=\"num\">3</td><td class=\"num\">1</td>"))
        #expect(page.contains("<th scope=\"row\">total</th><td class=\"num\">12</td><td class=\"num\">4</td><td class=\"num\">3</td><td class=\"num\">5</td>"))
        var none = ReportFixtures.week()
        none.refunds = RefundSummary()
        #expect(ReportPage.render(none).contains("No refund request in the last \(none.days) days."))
    }

    @Test("webhooks: the lead sums delivered, waiting and dead, a row per endpoint with its host only (a path can carry a token), its state and oldest wait; none: how to add one")
    func webhooksPanel() {
        let page = ReportPage.render(ReportFixtures.week())
        #expect(page.contains("1,514 messages delivered to 2 endpoints in the last 7 days; 60 waiting, 2 dead"), "\(page.components(separatedBy: "data-panel=\"webhooks\"").last?.prefix(500) ?? "")")
        #expect(page.contains("; 1 endpoint failing or disabled."))
        #expect(page.contains("hooks.example.com") && page.contains("crm.example.org"))
        #expect(!page.contains("SECRET-TOKEN"))
        #expect(page.contains("90 min") && page.contains("42 s") && page.contains("HTTP 500: upstream down"))
        var none = ReportFixtures.week()
        none.webhooks = []
        #expect(ReportPage.render(none).contains("No webhook endpoint."))
    }

    @Test("an empty database, and one never migrated, give a page that says so")
    func emptyPages() {
        let empty = ReportPage.render(ReportData(asOf: ReportFixtures.asOf, days: 30))
        #expect(empty.contains("Nothing to report yet"))
        #expect(!empty.contains("data-panel=\"segments\""))
        var new = ReportData(asOf: ReportFixtures.asOf, days: 30)
        new.migrated = false
        #expect(ReportPage.render(new).contains("no churnwatch schema yet"))
    }

    @Test("panels without data say so in words instead of drawing an empty chart; no prices gives \"No prices known yet\"")
    func quietPanels() {
        var data = ReportFixtures.week()
        data.flows = []
        data.events = []
        data.revenue = nil
        data.billing.recovery = []
        let page = ReportPage.render(data)
        #expect(page.contains("No subscription changed segment in the last 30 days"))
        #expect(page.contains("No events detected in these 7 days"))
        #expect(page.contains("No prices known yet"))
        #expect(page.contains("No billing trouble began in these 7 days"))
    }

    @Test("today's table: each segment's size on the newest day and its change since the day before, totals that add up")
    func todayTable() {
        let page = ReportPage.render(ReportFixtures.week())
        // active 700 - 6*5 = 670, the day before 675; will_not_renew 118 (+3).
        #expect(page.contains("<tr><th scope=\"row\">active</th><td class=\"num\">670</td><td class=\"num\">-5</td></tr>"))
        #expect(page.contains("<tr><th scope=\"row\">will_not_renew</th><td class=\"num\">118</td><td class=\"num\">+3</td></tr>"))
        #expect(page.contains("<tfoot><tr><th scope=\"row\">total</th><td class=\"num\">988</td><td class=\"num\">-2</td></tr></tfoot>"))
    }

    @Test("the recovery curve leaves out days with fewer than 10 episodes old enough; the table keeps them")
    func noisyRecoveryDays() {
        var data = ReportFixtures.week()
        data.billing.recovery[7] = .init(day: 7, observed: 3, recovered: 3)
        let page = ReportPage.render(data)
        let billing = page.components(separatedBy: "data-panel=\"billing\"")[1].components(separatedBy: "</section>")[0]
        #expect(billing.components(separatedBy: "<circle").count - 1 == 7)
        #expect(billing.contains("<tr><th scope=\"row\">7</th><td class=\"num\">3</td><td class=\"num\">3</td><td class=\"num\">100.0 %</td></tr>"))
    }

    @Test("formats: counts with thousands separators, changes signed, milliunits as amounts, durations")
    func formats() {
        #expect(Format.count(1_234_567) == "1,234,567")
        #expect(Format.count(-1_000) == "-1,000")
        #expect(Format.change(5) == "+5" && Format.change(0) == "0")
        #expect(Format.amount(milliunits: 1_178_820, currency: "USD") == "1,178.82")
        #expect(Format.amount(milliunits: 9_990, currency: "EUR") == "9.99")
        #expect(Format.amount(milliunits: 1_050, currency: nil) == "1.05")
        // Each currency in its own minor units (ISO 4217).
        #expect(Format.amount(milliunits: 14_900_000, currency: "JPY") == "14,900")
        #expect(Format.amount(milliunits: 2_990, currency: "KWD") == "2.990")
        #expect(CurrencyAmount.format(milliunits: 1_499_500, currency: "jpy") == "1500")
        #expect(CurrencyAmount.format(milliunits: -4_995, currency: "USD") == "-5.00")
        #expect(CurrencyAmount.format(milliunits: 5, currency: "USD") == "0.01" && CurrencyAmount.format(milliunits: -4, currency: "USD") == "0.00")
        #expect(Format.duration(12.5) == "12.5 s")
        #expect(Format.duration(125) == "2 min 05 s")
        #expect(Format.percent(0.5) == "50.0 %")
        #expect(Format.percent(nil) == "–")
    }
}
