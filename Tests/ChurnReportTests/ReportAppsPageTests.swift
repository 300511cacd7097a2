@testable import ChurnReport
import Foundation
import Testing

@Suite("report page of several apps: the pure renderer")
struct ReportAppsPageTests {
    /// Two apps with figures of their own: app b is app a's week with other sizes and a run of its own.
    static func twoApps() -> [ReportData] {
        var a = ReportFixtures.week()
        a.app = "com.example.a"
        var b = ReportFixtures.week(product: "com.example.b.yearly")
        b.app = "com.example.b"
        b.subscriptions = 250
        b.segmentDays = b.segmentDays.map { .init(day: $0.day, sizes: ["active": 200, "will_not_renew": 7, "price_increase_pending": 2]) }
        b.billing = .init(inRetry: 3, inGrace: 1, recovery: [])
        b.runs = [.init(id: 42, kind: "nightly", status: "failed", asOf: ReportFixtures.asOf, due: 9, polled: 1, failed: 8,
                        calls: ["status": 9], http429: nil, durationSeconds: 3)]
        return [a, b]
    }

    static func ids(_ page: String) -> [String] {
        matches(#" id="([^"]*)""#, page)
    }

    static func matches(_ pattern: String, _ text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range(at: 1), in: text)!]) }
    }

    /// The part of `page` from the element with `id` to the end of its section.
    static func section(_ id: String, _ page: String) -> String? {
        guard let start = page.range(of: "id=\"\(id)\"") else { return nil }
        let end = page.range(of: "</section>", range: start.upperBound..<page.endIndex)?.lowerBound ?? page.endIndex
        return String(page[start.upperBound..<end])
    }

    @Test("one app: render(apps:) is the page of render(_:), byte for byte")
    func oneAppIsUnchanged() {
        var a = ReportFixtures.week()
        a.app = "com.example.a"
        #expect(ReportPage.render(apps: [a]) == ReportPage.render(a))
        let empty = ReportData(asOf: ReportFixtures.asOf, days: 30)
        #expect(ReportPage.render(apps: [empty]) == ReportPage.render(empty))
        #expect(!ReportPage.render(a).contains("data-panel=\"apps\""), "no selector for one app")
    }

    @Test("two apps: a selector with each app's figures and a link to its section, then each app's section with every panel, ids unique and every link landing")
    func twoAppsPage() throws {
        let page = ReportPage.render(apps: Self.twoApps())
        let ids = Self.ids(page)
        #expect(Set(ids).count == ids.count, "duplicate ids: \(Dictionary(grouping: ids, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted())")
        let links = Self.matches(##"href="#([^"]*)""##, page)
        #expect(links.count >= 2 * (ReportPage.panels.count + 1))
        for link in links { #expect(ids.contains(link), "the link #\(link) lands nowhere") }

        let selector = try #require(Self.section("apps", page))
        #expect(selector.contains("<tr><th scope=\"row\"><a href=\"#com.example.a_app\">com.example.a</a></th><td class=\"num\">1,000</td><td class=\"num\">118</td><td class=\"num\">36</td><td class=\"num\">run 7: done, as of 2026-10-07 02:00 UTC</td></tr>"), "\(selector)")
        #expect(selector.contains("<tr><th scope=\"row\"><a href=\"#com.example.b_app\">com.example.b</a></th><td class=\"num\">250</td><td class=\"num\">9</td><td class=\"num\">4</td><td class=\"num\">run 42: failed, as of 2026-10-07 02:00 UTC</td></tr>"), "\(selector)")
        #expect(selector.contains("<tfoot><tr><th scope=\"row\">total</th><td class=\"num\">1,250</td><td class=\"num\">127</td><td class=\"num\">40</td>"))
        #expect(page.contains("2 apps, 1,250 subscriptions registered"))
        // The selector comes first, then a, then b, each headed by its bundle id.
        let order = ["id=\"apps\"", "<h2 class=\"app-title\">com.example.a</h2>", "<h2 class=\"app-title\">com.example.b</h2>"].map { page.range(of: $0)?.lowerBound }
        #expect(order.allSatisfy { $0 != nil } && order.map { $0! } == order.map { $0! }.sorted(), "the selector, then a, then b")

        for app in ["com.example.a", "com.example.b"] {
            #expect(page.contains("<section class=\"app\" id=\"\(app)_app\" data-app=\"\(app)\">"))
            for panel in ReportPage.panels {
                #expect(page.contains("id=\"\(app)_\(panel.id)\" data-panel=\"\(panel.id)\""), "\(app): panel \(panel.id) missing")
                #expect(page.contains("<a href=\"#\(app)_\(panel.id)\">\(panel.title)</a>"), "\(app): no link to \(panel.id)")
            }
        }
        // Each app's numbers are its own: a's today table and runs, b's.
        let aSegments = try #require(Self.section("com.example.a_segments", page))
        #expect(aSegments.contains("<tr><th scope=\"row\">active</th><td class=\"num\">670</td><td class=\"num\">-5</td></tr>"))
        #expect(aSegments.contains("<table id=\"com.example.a_t-segments-today\">"))
        let bSegments = try #require(Self.section("com.example.b_segments", page))
        #expect(bSegments.contains("<tr><th scope=\"row\">active</th><td class=\"num\">200</td><td class=\"num\">0</td></tr>"))
        #expect(bSegments.contains("com.example.b.yearly") && !aSegments.contains("com.example.b.yearly"))
        #expect(try #require(Self.section("com.example.b_runs", page)).contains("Run 42 (nightly"))
        #expect(try #require(Self.section("com.example.a_runs", page)).contains("Run 7 (nightly"))
        #expect(try #require(Self.section("com.example.b_billing", page)).contains("<b>1</b><span>in grace period"))
    }

    @Test("a hostile bundle id stays text and its ids stay unique; bundle ids that make the same slug get their own ids; an app with nothing says so in its section")
    func hostileAndEmptyApps() {
        var a = ReportFixtures.week()
        a.app = ReportFixtures.hostile
        var b = ReportFixtures.week()
        b.app = "com example"
        var c = ReportData(asOf: ReportFixtures.asOf, days: 7)
        c.app = "com-example"
        let page = ReportPage.render(apps: [a, b, c])
        #expect(!page.contains(ReportFixtures.hostile) && !page.contains("<script"))
        #expect(page.contains("<h2 class=\"app-title\">\(HTML.escape(ReportFixtures.hostile))</h2>"))
        let ids = Self.ids(page)
        #expect(Set(ids).count == ids.count)
        #expect(ids.contains("com-example_app") && ids.contains("com-example-2_app"))
        #expect(ids.allSatisfy { !$0.contains(" ") && !$0.contains("<") && !$0.contains("\"") }, "\(ids)")
        #expect(page.contains("id=\"com-example-2_empty\" data-panel=\"empty\""), "the empty app says so in its section")
        #expect(page.contains("<td class=\"num\">no run yet</td>"))
        #expect(page.contains("3 apps, 2,000 subscriptions registered"))
    }

    @Test("the page of several apps is still self-contained: no script, nothing loaded")
    func selfContained() {
        let page = ReportPage.render(apps: Self.twoApps())
        for banned in ["<script", "src=", "@import", "url(", "<link", "https://"] {
            #expect(!page.contains(banned), "page contains \(banned)")
        }
    }
}
