import Foundation
import Postgres
import Testing

/// `churnwatch report` of a real population (nights against the simulator), opened in headless
/// Chromium: it parses without console messages, every panel is there and filled, the tables'
/// numbers equal independent SQL over the same tables, hostile database values stay text, and
/// screenshots at desktop and phone widths are taken.
@Suite("churnwatch report in a browser", .serialized)
struct ReportBrowserTests {
    typealias E2E = NightlyRunEndToEndTests
    static let hostile = "<script>alert('cw')</script>\"&<img src=x>"
    static let panels = ["segments", "events", "flows", "billing", "winback", "revenue", "runs"]

    @Test("6 nights of 400 subscribers: report opens in Chromium without console messages, all panels filled, tables equal the SQL, hostile values escaped, desktop and phone screenshots")
    func reportInBrowser() async throws {
        let (found, reason) = HeadlessChromium.find()
        guard let chromium = found else {
            print("ReportBrowserTests: skipped: \(reason)")
            return
        }
        let world = try await E2E.World.make(subscribers: 400, seed: 23, populationLead: 45 * E2E.day)
        defer { world.close() }
        // An offer with a holdout, so panel 5 has outcomes and held-out entries to show.
        let offer = try await CLIRunner.run(["offers", "set", "--campaign", "save_offer", "--offer-id", "save50", "--holdout", "0.3"], environment: world.env)
        #expect(offer.status == 0, "\(offer.stderr)")
        var last = E2E.start
        for night in 0..<6 {
            last = E2E.start.addingTimeInterval(Double(night) * E2E.day)
            let r = try await world.night(last, extra: ["--status-rate", "5000", "--history-rate", "5000"])
            #expect(r.status == 0, "night \(night): \(r.stderr.suffix(400))")
        }
        let db = try world.connect()
        // Hostile values where a database could hold them: a product id and a customer ref (also
        // in today's sizes by product) and an endpoint name in a worker's stats.
        try db.execute("""
            UPDATE churnwatch.subscription_segments SET customer_ref = \(Self.hostile)
            WHERE original_transaction_id IN (SELECT original_transaction_id FROM churnwatch.subscription_segments LIMIT 3)
            """)
        try db.execute("""
            INSERT INTO churnwatch.segment_daily (day, segment, product_id, subscriptions) VALUES (\(last)::date, 'active', \(Self.hostile), 1)
            """)
        try db.execute("""
            INSERT INTO churnwatch.run_workers (run_id, worker, stats)
            SELECT max(id), 'hostile', \(PostgresJSON(text: "{\"calls\": {\"\(Self.hostile.replacingOccurrences(of: "\"", with: "\\\""))\": 1}}")) FROM churnwatch.runs
            """)

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-report-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("report.html")
        // A night's events are detected a moment after its as-of time: the report is read later that morning.
        let morning = last.addingTimeInterval(6 * 3600)
        let r = try await CLIRunner.run(["report", "--out", page.path, "--days", "7", "--as-of", E2E.iso(morning)], environment: world.env)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == page.path)
        let source = try String(contentsOf: page, encoding: .utf8)
        #expect(!source.contains(Self.hostile) && !source.contains("<script") && !source.contains("<img"))

        let dom = try await chromium.dumpDOM(page)
        #expect(dom.status == 0, "\(dom.stderr.suffix(1000))")
        let console = dom.stderr.split(separator: "\n").filter { $0.contains("CONSOLE") }
        #expect(console.isEmpty, "console: \(console)")
        for element in ["<script", "<img", "<iframe", "<link"] {
            #expect(!dom.stdout.contains(element), "the parsed page has an element \(element)")
        }
        for panel in Self.panels {
            let section = Self.section(panel, in: dom.stdout)
            #expect(section != nil, "panel \(panel) missing")
            #expect(section?.contains("<table") == true || section?.contains("class=\"nothing\"") == true, "panel \(panel) empty")
        }
        // Billing draws its curve only when trouble began in the window (checked with the SQL below).
        for panel in ["segments", "events", "flows", "winback", "runs"] {
            #expect(Self.section(panel, in: dom.stdout)?.contains("<svg") == true, "panel \(panel) has no chart")
        }
        // The simulator signs renewal prices, so revenue at risk is known (checked against SQL below).
        #expect(Self.section("revenue", in: dom.stdout)?.contains("No prices known yet") == false)
        #expect(!dom.stdout.contains("No outcomes yet"), "the queue has entries: panel 5 shows their outcomes")
        try Self.expectOutcomesMatchSQL(dom.stdout, db: db, asOf: morning)
        try Self.expectTablesMatchSQL(dom.stdout, db: db, asOf: morning)

        for (name, width, height) in [("desktop", 1280, 2400), ("phone", 390, 2400)] {
            let png = dir.appendingPathComponent("\(name).png")
            let shot = try await chromium.screenshot(page, to: png, width: width, height: height)
            #expect(shot.status == 0, "\(name): \(shot.stderr.suffix(500))")
            let data = (try? Data(contentsOf: png)) ?? Data()
            #expect(data.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]) && data.count > 20_000, "\(name) screenshot: \(data.count) bytes")
        }
    }

    @Test("a new database gives a page that says so (exit 0); an --out that is no regular file is written into, not replaced; a bad --days or --as-of, or an --out that cannot be written, one line and exit 78")
    func newDatabaseAndBadInput() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-report-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("new.html")
        let fresh = try await CLIRunner.run(["report", "--out", page.path], environment: env)
        #expect(fresh.status == 0, "\(fresh.stderr)")
        #expect(try String(contentsOf: page, encoding: .utf8).contains("This database has no churnwatch schema yet."))
        #expect(try await CLIRunner.run(["migrate"], environment: env).status == 0)
        let empty = try await CLIRunner.run(["report", "--out", page.path], environment: env)
        #expect(empty.status == 0, "\(empty.stderr)")
        #expect(try String(contentsOf: page, encoding: .utf8).contains("Nothing to report yet"))
        // An --out that is not a regular file (here a symlink; /dev/null alike) is written into, never replaced.
        let link = dir.appendingPathComponent("link.html")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: page.path)
        try Data().write(to: page)
        let linked = try await CLIRunner.run(["report", "--out", link.path], environment: env)
        #expect(linked.status == 0, "\(linked.stderr)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == page.path, "the link is still a link")
        #expect(try String(contentsOf: page, encoding: .utf8).contains("Nothing to report yet"), "written through the link")
        for (args, says) in [(["--days", "0"], "--days 0 is out of range"), (["--as-of", "yesterday"], "--as-of \"yesterday\""),
                             (["--out", dir.appendingPathComponent("missing/dir/r.html").path], "cannot be written")] {
            let r = try await CLIRunner.run(["report"] + args, environment: env)
            #expect(r.status == 78, "\(args): \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains(says), "\(args): \(r.stderr)")
        }
    }

    static func section(_ panel: String, in dom: String) -> String? {
        guard let start = dom.range(of: "data-panel=\"\(panel)\"") else { return nil }
        let end = dom.range(of: "</section>", range: start.upperBound..<dom.endIndex)?.lowerBound ?? dom.endIndex
        return String(dom[start.upperBound..<end])
    }

    /// The tables against independent SQL over the same tables.
    static func expectTablesMatchSQL(_ dom: String, db: PostgresConnection, asOf: Date) throws {
        let today = try #require(ParsedTable(id: "t-segments-today", in: dom))
        var sizes: [String: Int] = [:]
        for row in try db.query("""
            SELECT segment, sum(subscriptions)::bigint FROM churnwatch.segment_daily WHERE day = \(asOf)::date GROUP BY segment
            """) { sizes[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1) }
        // Segments seen earlier in the window but empty today are listed with 0.
        #expect(Dictionary(uniqueKeysWithValues: today.rows.map { ($0.key, ParsedTable.number($0.cells[0]) ?? -1) }).filter { $0.value != 0 } == sizes)
        #expect(sizes.count >= 3, "a real population spreads over segments: \(sizes)")
        let products = try #require(ParsedTable(id: "t-segments-products", in: dom))
        #expect(products.rows.contains { $0.cells.first == hostile }, "the hostile product id is shown as text")

        let events = try #require(ParsedTable(id: "t-events", in: dom))
        var expected: [String: Int] = [:]
        for row in try db.query("""
            SELECT to_char(detected_at, 'YYYY-MM-DD'), event, count(*) FROM churnwatch.churn_events
            WHERE detected_at <= \(asOf) AND detected_at >= \(asOf)::date - 6 GROUP BY 1, 2
            """) { expected["\(try row.decode(String.self, at: 0)) \(try row.decode(String.self, at: 1))"] = try row.decode(Int.self, at: 2) }
        var shown: [String: Int] = [:]
        for row in events.rows {
            for (header, cell) in zip(events.headers.dropFirst(), row.cells) where header != "total" {
                if let n = ParsedTable.number(cell), n > 0 { shown["\(row.key) \(header)"] = n }
            }
        }
        #expect(shown == expected)
        #expect(!expected.isEmpty, "nights after the first write events")

        let flows = try #require(ParsedTable(id: "t-flows", in: dom))
        var moves: [String: [Int]] = [:]
        for row in try db.query("""
            SELECT from_segment || ' → ' || to_segment, count(*) FILTER (WHERE changed_at > \(asOf) - interval '7 days'), count(*)
            FROM churnwatch.segment_changes WHERE changed_at <= \(asOf) AND changed_at > \(asOf) - interval '30 days' GROUP BY 1
            """) { moves[try row.decode(String.self, at: 0)] = [try row.decode(Int.self, at: 1), try row.decode(Int.self, at: 2)] }
        #expect(Dictionary(uniqueKeysWithValues: flows.rows.map { ($0.key, $0.cells.compactMap(ParsedTable.number)) }) == moves)

        let winback = try #require(ParsedTable(id: "t-winback", in: dom))
        for row in try db.query("SELECT campaign, status, count(*) FROM churnwatch.winback_queue GROUP BY 1, 2") {
            let cell = winback.cell(try row.decode(String.self, at: 0), try row.decode(String.self, at: 1))
            #expect(cell.flatMap(ParsedTable.number) == (try row.decode(Int.self, at: 2)))
        }

        let revenue = try #require(ParsedTable(id: "t-revenue", in: dom))
        var atRisk: [String: Int] = [:]
        for row in try db.query("""
            SELECT segment || ' ' || renewal_currency, count(*) FROM churnwatch.subscription_segments
            WHERE segment IN ('will_not_renew', 'price_increase_pending', 'grace_period', 'billing_retry')
              AND renewal_price IS NOT NULL AND renewal_currency IS NOT NULL GROUP BY 1
            """) { atRisk[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1) }
        #expect(Dictionary(revenue.rows.map { ("\($0.key) \($0.cells.first ?? "")", ParsedTable.number($0.cells.dropFirst().first ?? "") ?? -1) },
                           uniquingKeysWith: +) == atRisk)
        #expect(!atRisk.isEmpty, "the simulator's renewal prices reach subscription_segments")

        let runs = try #require(ParsedTable(id: "t-runs", in: dom))
        let runRows = try db.query("SELECT id, due, polled, failed FROM churnwatch.runs ORDER BY id DESC LIMIT 10")
        #expect(runs.rows.count == runRows.count)
        for row in runRows {
            let id = String(try row.decode(Int64.self, at: 0))
            for (k, header) in ["due", "polled", "failed"].enumerated() {
                #expect(runs.cell(id, header).flatMap(ParsedTable.number) == (try row.decode(Int.self, at: k + 1)), "run \(id) \(header)")
            }
        }
        #expect(runs.headers.contains("calls: \(hostile)"), "the hostile endpoint name is a column header, as text")

        let starts = try db.query("""
            SELECT count(*) FROM churnwatch.churn_events WHERE event IN ('billing_retry_started', 'grace_period_started')
            AND occurred_at > \(asOf) - interval '7 days' AND detected_at <= \(asOf)
            """)[0].decode(Int.self, at: 0)
        if starts > 0 {
            #expect(section("billing", in: dom)?.contains("<svg") == true, "billing has no chart")
            let billing = try #require(ParsedTable(id: "t-billing", in: dom))
            #expect(billing.rows.count == 8, "days 0 to 7")
            let episodes = ParsedTable.number(billing.rows[0].cells[0]) ?? -1
            #expect(episodes >= 1 && episodes <= starts, "day 0: \(episodes) episodes from \(starts) start events")
        } else {
            #expect(section("billing", in: dom)?.contains("No billing trouble began") == true)
        }
        let now = try db.query("SELECT count(*) FILTER (WHERE segment = 'grace_period'), count(*) FILTER (WHERE segment = 'billing_retry') FROM churnwatch.subscription_segments")[0]
        #expect(dom.contains("<b>\(try now.decode(Int.self, at: 0))</b><span>in grace period"))
        #expect(dom.contains("<b>\(try now.decode(Int.self, at: 1))</b><span>in billing retry"))
    }

    /// The outcomes table against SQL: per campaign and offer, treated and held-out entries and
    /// acked ones; held-out entries exist for the offer's campaign only.
    static func expectOutcomesMatchSQL(_ dom: String, db: PostgresConnection, asOf: Date) throws {
        let outcomes = try #require(ParsedTable(id: "t-outcomes", in: dom))
        let rows = try db.query("""
            SELECT campaign, coalesce(offer_id, '(none)'), count(*) FILTER (WHERE NOT holdout), count(*) FILTER (WHERE NOT holdout AND status = 'done'),
                   count(*) FILTER (WHERE holdout)
            FROM churnwatch.winback_queue GROUP BY 1, 2
            """)
        #expect(outcomes.rows.count == rows.count)
        for row in rows {
            let (campaign, offer) = (try row.decode(String.self, at: 0), try row.decode(String.self, at: 1))
            let shown = try #require(outcomes.rows.first { $0.key == campaign && $0.cells.first == offer }, "\(campaign) \(offer) missing")
            let numbers = [1, 2, 4].map { ParsedTable.number(shown.cells[$0]) } // entries, delivered, holdout
            #expect(numbers == [try row.decode(Int.self, at: 2), try row.decode(Int.self, at: 3), try row.decode(Int.self, at: 4)], "\(campaign) \(offer)")
        }
        let heldOut = try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE status = 'held_out' AND campaign = 'save_offer' AND offer_id = 'save50'")[0]
        #expect(try heldOut.decode(Int.self, at: 0) > 0, "a 0.3 holdout over a week of save_offer entries holds some out")
        #expect(try #require(ParsedTable(id: "t-winback", in: dom)).headers.contains("held_out"))
    }
}
