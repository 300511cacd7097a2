import Foundation
import Postgres
import Testing

/// Issue 26: the reading commands show every app of a database (or those named with --app),
/// each with its own numbers. Two apps' rows are written with SQL, each naming its app.
@Suite("several apps: report, status, segments, outcomes, refunds (the binary)")
struct AppsReadingCLITests {
    static let (a, b) = ("com.example.a", "com.example.b")
    static let morning = "2026-11-21T08:00:00Z"

    /// A migrated database of two apps: a (the default: 3 subscriptions, one will_not_renew, a
    /// finished run) and b (5 subscriptions, one in billing retry and four will_not_renew, a
    /// failed run, a refund request, a notification of its change feed).
    struct TwoApps {
        let db: ScratchDatabase
        let connection: PostgresConnection
        let runA: Int64, runB: Int64
        var env: [String: String] { ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": AppsReadingCLITests.a] }

        static func make() async throws -> TwoApps {
            let db = try ScratchDatabase.create()
            let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": AppsReadingCLITests.a]
            let migrate = try await CLIRunner.run(["migrate"], environment: env)
            guard migrate.status == 0 else { db.drop(); throw CLITestError("migrate failed: \(migrate.stderr)") }
            let add = try await CLIRunner.run(["apps", "add", AppsReadingCLITests.b, "--app-apple-id", "2002"], environment: env)
            guard add.status == 0 else { db.drop(); throw CLITestError("apps add failed: \(add.stderr)") }
            let c = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
            try c.runScript(Self.rows)
            let runs = try c.query("SELECT bundle_id, id FROM churnwatch.runs ORDER BY bundle_id")
            return TwoApps(db: db, connection: c, runA: try runs[0].decode(Int64.self, at: 1), runB: try runs[1].decode(Int64.self, at: 1))
        }

        static let rows = """
            INSERT INTO churnwatch.subscriptions (original_transaction_id, bundle_id)
            SELECT '100' || n, 'com.example.a' FROM generate_series(1, 3) AS n
            UNION ALL SELECT '200' || n, 'com.example.b' FROM generate_series(1, 5) AS n;
            INSERT INTO churnwatch.subscription_segments (original_transaction_id, product_id, segment, segment_since, renewal_price, renewal_currency, bundle_id)
            VALUES ('1001', 'a.monthly', 'active', '2026-11-01', NULL, NULL, 'com.example.a'),
                   ('1002', 'a.monthly', 'active', '2026-11-01', NULL, NULL, 'com.example.a'),
                   ('1003', 'a.monthly', 'will_not_renew', '2026-11-20', 9990, 'USD', 'com.example.a'),
                   ('2001', 'b.yearly', 'billing_retry', '2026-11-19', 49990, 'EUR', 'com.example.b'),
                   ('2002', 'b.yearly', 'will_not_renew', '2026-11-20', 49990, 'EUR', 'com.example.b'),
                   ('2003', 'b.yearly', 'will_not_renew', '2026-11-20', 49990, 'EUR', 'com.example.b'),
                   ('2004', 'b.yearly', 'will_not_renew', '2026-11-20', 49990, 'EUR', 'com.example.b'),
                   ('2005', 'b.yearly', 'will_not_renew', '2026-11-20', 49990, 'EUR', 'com.example.b');
            INSERT INTO churnwatch.segment_daily (bundle_id, day, segment, product_id, subscriptions)
            VALUES ('com.example.a', '2026-11-20', 'active', 'a.monthly', 3),
                   ('com.example.a', '2026-11-21', 'active', 'a.monthly', 2), ('com.example.a', '2026-11-21', 'will_not_renew', 'a.monthly', 1),
                   ('com.example.b', '2026-11-20', 'will_not_renew', 'b.yearly', 2), ('com.example.b', '2026-11-20', 'active', 'b.yearly', 3),
                   ('com.example.b', '2026-11-21', 'will_not_renew', 'b.yearly', 4), ('com.example.b', '2026-11-21', 'billing_retry', 'b.yearly', 1);
            INSERT INTO churnwatch.runs (kind, as_of, started_at, finished_at, status, due, polled, failed, bundle_id)
            VALUES ('nightly', '2026-11-21 02:00:00+00', '2026-11-21 02:00:00+00', '2026-11-21 02:01:00+00', 'done', 3, 3, 0, 'com.example.a'),
                   ('nightly', '2026-11-21 02:00:00+00', '2026-11-21 02:00:00+00', '2026-11-21 02:02:00+00', 'failed', 5, 1, 4, 'com.example.b');
            INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status, outcome, failure_class)
            SELECT r.id, s.original_transaction_id, 'new', CASE WHEN s.original_transaction_id IN ('2001', '1001', '1002', '1003') THEN 'done' ELSE 'failed' END,
                   CASE WHEN s.original_transaction_id IN ('2001', '1001', '1002', '1003') THEN 'ok' ELSE 'unavailable: 503' END,
                   CASE WHEN s.original_transaction_id IN ('2001', '1001', '1002', '1003') THEN NULL ELSE 'unavailable' END
            FROM churnwatch.subscriptions s JOIN churnwatch.runs r ON r.bundle_id = s.bundle_id;
            INSERT INTO churnwatch.winback_queue (original_transaction_id, campaign, episode, product_id, reason, not_before, expires_at, opened_at, bundle_id)
            SELECT s.original_transaction_id, CASE WHEN ss.segment = 'billing_retry' THEN 'billing_fix' ELSE 'save_offer' END, 'e1', ss.product_id,
                   ss.segment, '2026-11-20 02:00:00+00', '2027-01-01 00:00:00+00', '2026-11-20 02:00:00+00', s.bundle_id
            FROM churnwatch.subscriptions s JOIN churnwatch.subscription_segments ss USING (original_transaction_id)
            WHERE ss.segment <> 'active';
            INSERT INTO churnwatch.refund_requests (notification_uuid, original_transaction_id, transaction_id, environment, requested_at, deadline,
                received_at, state, policy_branch, attempts, answered_at, decision, decided_at, bundle_id)
            VALUES ('6f1c0d2e-0000-4000-8000-000000000001', '2002', '902', 'Production', '2026-11-20 10:00:00+00', '2026-11-20 22:00:00+00',
                    '2026-11-20 10:01:00+00', 'answered', 'no_preference', 1, '2026-11-20 10:05:00+00', 'refunded', '2026-11-20 18:00:00+00', 'com.example.b');
            INSERT INTO churnwatch.notifications (notification_uuid, notification_type, signed_date, original_transaction_id, environment, source,
                outcome, received_at, bundle_id)
            VALUES ('6f1c0d2e-0000-4000-8000-000000000002', 'DID_RENEW', '2026-11-21 01:00:00+00', '2001', 'Production', 'history', 'applied',
                    '2026-11-21 01:00:05+00', 'com.example.b');
            """
    }

    static func json(_ line: some StringProtocol) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }

    static func id(_ value: Any?) -> Int64? { (value as? NSNumber)?.int64Value }

    @Test("report: the selector and each app's section with its own numbers; --app gives one app's page as it always was; the page of two apps opens in Chromium without console messages")
    func report() async throws {
        let s = try await TwoApps.make()
        defer { s.db.drop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-apps-report-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("apps.html")
        let r = try await CLIRunner.run(["report", "--out", page.path, "--days", "7", "--as-of", Self.morning], environment: s.env)
        #expect(r.status == 0, "\(r.stderr)")
        let html = try String(contentsOf: page, encoding: .utf8)
        let selector = try #require(ParsedTable(id: "t-apps", in: html))
        #expect(selector.rows.map(\.key) == ["<a href=\"#\(Self.a)_app\">\(Self.a)</a>", "<a href=\"#\(Self.b)_app\">\(Self.b)</a>"], "the default app first")
        #expect(selector.rows.map { $0.cells.prefix(3) } == [["3", "1", "0"], ["5", "4", "1"]], "subscriptions, at risk, billing trouble: \(selector.rows)")
        #expect(selector.rows[0].cells[3].hasPrefix("run \(s.runA): done") && selector.rows[1].cells[3].hasPrefix("run \(s.runB): failed"))
        #expect(html.contains("2 apps, 8 subscriptions registered"))
        // Each app's tables are its own: today's sizes, the win-back queue, the runs, refunds.
        let todayA = try #require(ParsedTable(id: "\(Self.a)_t-segments-today", in: html))
        let todayB = try #require(ParsedTable(id: "\(Self.b)_t-segments-today", in: html))
        #expect(Dictionary(uniqueKeysWithValues: todayA.rows.map { ($0.key, $0.cells[0]) }) == ["active": "2", "will_not_renew": "1"])
        #expect(Dictionary(uniqueKeysWithValues: todayB.rows.map { ($0.key, $0.cells[0]) }) == ["billing_retry": "1", "will_not_renew": "4", "active": "0"])
        #expect(try #require(ParsedTable(id: "\(Self.a)_t-winback", in: html)).cell("save_offer", "pending") == "1")
        #expect(try #require(ParsedTable(id: "\(Self.b)_t-winback", in: html)).cell("save_offer", "pending") == "4")
        #expect(try #require(ParsedTable(id: "\(Self.a)_t-runs", in: html)).rows.map(\.key) == [String(s.runA)])
        #expect(try #require(ParsedTable(id: "\(Self.b)_t-runs", in: html)).rows.map(\.key) == [String(s.runB)])
        #expect(ParsedTable(id: "\(Self.a)_t-refunds", in: html) == nil && ParsedTable(id: "\(Self.b)_t-refunds", in: html)?.footer?.first == "1")
        #expect(ParsedTable(id: "t-segments-today", in: html) == nil, "no id without its app's prefix")

        // One app named: its page alone, as a single-app deployment's.
        let onlyB = dir.appendingPathComponent("b.html")
        let one = try await CLIRunner.run(["report", "--app", Self.b, "--out", onlyB.path, "--days", "7", "--as-of", Self.morning], environment: s.env)
        #expect(one.status == 0, "\(one.stderr)")
        let single = try String(contentsOf: onlyB, encoding: .utf8)
        #expect(!single.contains("data-panel=\"apps\"") && single.contains("5 subscriptions registered"))
        #expect(try #require(ParsedTable(id: "t-segments-today", in: single)).rows.first { $0.key == "will_not_renew" }?.cells.first == "4")

        try await Self.inBrowser(page, dir: dir)
    }

    /// The page of two apps in headless Chromium: no console message, every panel of each app,
    /// ids unique in the parsed DOM, screenshots at desktop and phone widths.
    static func inBrowser(_ page: URL, dir: URL) async throws {
        let (found, reason) = HeadlessChromium.find()
        guard let chromium = found else {
            print("AppsReadingCLITests: browser part skipped: \(reason)")
            return
        }
        let dom = try await chromium.dumpDOM(page)
        #expect(dom.status == 0, "\(dom.stderr.suffix(1000))")
        let console = dom.stderr.split(separator: "\n").filter { $0.contains("CONSOLE") }
        #expect(console.isEmpty, "console: \(console)")
        for app in [a, b] {
            for panel in ["segments", "events", "flows", "billing", "winback", "revenue", "refunds", "runs"] {
                #expect(dom.stdout.contains("id=\"\(app)_\(panel)\""), "\(app): panel \(panel) missing in the DOM")
            }
        }
        let ids = ParsedTable.matches(#" id="([^"]*)""#, in: dom.stdout).map { $0[0] }
        #expect(ids.count > 30 && Set(ids).count == ids.count, "\(ids.count) ids, \(Set(ids).count) distinct")
        for (name, width) in [("desktop", 1280), ("phone", 390)] {
            let png = dir.appendingPathComponent("\(name).png")
            let shot = try await chromium.screenshot(page, to: png, width: width, height: 2400)
            #expect(shot.status == 0, "\(name): \(shot.stderr.suffix(500))")
            let data = (try? Data(contentsOf: png)) ?? Data()
            #expect(data.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]) && data.count > 10_000, "\(name) screenshot: \(data.count) bytes")
        }
    }

    @Test("status: one block per app headed by its bundle id; --json keeps the default app's fields on top and lists every app; RUN of any app; --app one app: as before")
    func status() async throws {
        let s = try await TwoApps.make()
        defer { s.db.drop() }
        let text = try await CLIRunner.run(["status", "--as-of", Self.morning], environment: s.env)
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "app \(Self.a)" && lines.dropFirst().first?.hasPrefix("run \(s.runA) (nightly") == true, "\(text.stdout)")
        let bAt = try #require(lines.firstIndex(of: "app \(Self.b)"), "\(text.stdout)")
        #expect(lines[bAt - 1] == "" && lines[bAt + 1] == "run \(s.runB) (nightly, as of 2026-11-21T02:00:00Z): failed")
        #expect(lines[bAt...].contains { $0.hasPrefix("items: 5 of 5 finished (100.0%): 1 polled, 4 failed (unavailable 4)") }, "\(text.stdout)")

        let json = try await CLIRunner.run(["status", "--json", "--as-of", Self.morning], environment: s.env)
        #expect(json.status == 0, "\(json.stderr)")
        let object = try Self.json(json.stdout)
        #expect(object["bundle_id"] as? String == Self.a)
        #expect(Self.id((object["run"] as? [String: Any])?["id"]) == s.runA, "the default app's run on top")
        #expect((object["items"] as? [String: Any])?["total"] as? Int == 3)
        let apps = try #require(object["apps"] as? [[String: Any]])
        #expect(apps.map { $0["bundle_id"] as? String } == [Self.a, Self.b])
        #expect(apps.map { Self.id(($0["run"] as? [String: Any])?["id"]) } == [s.runA, s.runB])
        #expect((apps[1]["items"] as? [String: Any])?["failed"] as? Int == 4 && apps[1]["apps"] == nil)
        // The change feed is each app's, shown beside its run once used: b's alone.
        #expect(object["feed"] == nil && apps[0]["feed"] == nil, "\(json.stdout)")
        #expect((apps[1]["feed"] as? [String: Any])?["planning_by_feed_possible"] as? Bool == true, "\(json.stdout)")
        #expect(lines[..<bAt].allSatisfy { !$0.hasPrefix("change feed:") } && lines[bAt...].contains { $0.hasPrefix("change feed:") }, "\(text.stdout)")

        // Run ids are global: b's run, asked for by id, whatever the default app.
        let byId = try await CLIRunner.run(["status", String(s.runB), "--json", "--as-of", Self.morning], environment: s.env)
        #expect(byId.status == 0, "\(byId.stderr)")
        let run = try Self.json(byId.stdout)
        #expect(run["bundle_id"] as? String == Self.b && Self.id((run["run"] as? [String: Any])?["id"]) == s.runB)
        #expect((run["feed"] as? [String: Any])?["records_total"] != nil, "run RUN with its app's feed: \(byId.stdout)")
        #expect((run["apps"] as? [[String: Any]])?.map { $0["bundle_id"] as? String } == [Self.b])
        let byIdText = try await CLIRunner.run(["status", String(s.runB), "--as-of", Self.morning], environment: s.env)
        #expect(byIdText.stdout.hasPrefix("app \(Self.b)\nrun \(s.runB) (nightly"), "\(byIdText.stdout)")

        let onlyB = try await CLIRunner.run(["status", "--app", Self.b, "--as-of", Self.morning], environment: s.env)
        #expect(onlyB.status == 0 && onlyB.stdout.hasPrefix("run \(s.runB) (nightly"), "one app: no heading: \(onlyB.stdout)")
        let unknown = try await CLIRunner.run(["status", "--app", "com.example.nope"], environment: s.env)
        #expect(unknown.status == 78 && unknown.stderr.split(separator: "\n").count == 1, "\(unknown.stderr)")
    }

    @Test("segments, outcomes, refunds: each app's block after its name; CSV and JSON name the app in bundle_id, one header for all")
    func segmentsOutcomesRefunds() async throws {
        let s = try await TwoApps.make()
        defer { s.db.drop() }
        let table = try await CLIRunner.run(["segments", "--day", "2026-11-21"], environment: s.env)
        #expect(table.status == 0, "\(table.stderr)")
        let blocks = table.stdout.components(separatedBy: "\n\napp \(Self.b)\n")
        #expect(blocks.count == 2 && blocks[0].hasPrefix("app \(Self.a)\nsegment "), "\(table.stdout)")
        #expect(blocks[0].contains("\nactive  ") && blocks[1].contains("change since 2026-11-20"))
        let totals = blocks.map { $0.split(separator: "\n").first { $0.hasPrefix("total") }.map { $0.split(separator: " ")[1] } }
        #expect(totals == ["3", "5"], "each app's total: \(table.stdout)")

        let csv = try await CLIRunner.run(["segments", "--csv", "--day", "2026-11-21"], environment: s.env)
        let rows = csv.stdout.split(separator: "\n").map(String.init)
        #expect(rows.first == "segment,subscriptions,change,bundle_id" && rows.filter { $0.hasPrefix("segment,") }.count == 1)
        #expect(rows.count == 1 + 2 * 13)
        #expect(rows.contains("will_not_renew,1,1,\(Self.a)") && rows.contains("will_not_renew,4,2,\(Self.b)"), "\(csv.stdout)")
        #expect(rows.contains("active,2,-1,\(Self.a)") && rows.contains("active,0,-3,\(Self.b)"))
        let revenue = try await CLIRunner.run(["segments", "--revenue", "--csv"], environment: s.env)
        #expect(revenue.stdout.split(separator: "\n").map(String.init) == [
            "segment,currency,subscriptions,revenue_at_risk,bundle_id", "will_not_renew,USD,1,9.99,\(Self.a)",
            "billing_retry,EUR,1,49.99,\(Self.b)", "will_not_renew,EUR,4,199.96,\(Self.b)",
        ], "\(revenue.stdout)")

        let outcomes = try await CLIRunner.run(["outcomes", "--json", "--as-of", Self.morning], environment: s.env)
        #expect(outcomes.status == 0, "\(outcomes.stderr)")
        let lines = try outcomes.stdout.split(separator: "\n").map(Self.json)
        #expect(lines.map { "\($0["bundle_id"] as? String ?? "?") \($0["campaign"] as? String ?? "?") \($0["entries"] as? Int ?? -1)" }
                == ["\(Self.a) save_offer 1", "\(Self.b) billing_fix 1", "\(Self.b) save_offer 4"], "\(outcomes.stdout)")
        let outcomesCSV = try await CLIRunner.run(["outcomes", "--csv", "--as-of", Self.morning], environment: s.env)
        let csvLines = outcomesCSV.stdout.split(separator: "\n")
        #expect(csvLines.first?.hasSuffix(",revenue_kept,bundle_id") == true && csvLines.count == 4)
        #expect(csvLines.dropFirst().map { $0.split(separator: ",").last.map(String.init) } == [Self.a, Self.b, Self.b])
        let outcomesText = try await CLIRunner.run(["outcomes", "--as-of", Self.morning], environment: s.env)
        #expect(outcomesText.stdout.hasPrefix("app \(Self.a)\ncampaign") && outcomesText.stdout.contains("\n\napp \(Self.b)\ncampaign"))

        let refunds = try await CLIRunner.run(["refunds", "--json", "--list", "--since", "2026-11-01", "--as-of", Self.morning], environment: s.env)
        #expect(refunds.status == 0, "\(refunds.stderr)")
        let objects = try refunds.stdout.split(separator: "\n").map(Self.json)
        #expect(objects.map { $0["bundle_id"] as? String } == [Self.a, Self.b, Self.b], "a's counts, b's counts, b's request")
        #expect(objects.map { $0["requests"] as? Int } == [0, 1, nil] && objects[1]["refunded"] as? Int == 1)
        #expect(objects[2]["original_transaction_id"] as? String == "2002")
        let refundsText = try await CLIRunner.run(["refunds", "--since", "2026-11-01", "--as-of", Self.morning], environment: s.env)
        #expect(refundsText.stdout.hasPrefix("app \(Self.a)\nrefund requests signed") && refundsText.stdout.contains("\n\napp \(Self.b)\nrefund requests signed"))
        #expect(refundsText.stdout.contains(": 1; answered in time 1"), "\(refundsText.stdout)")
        let onlyA = try await CLIRunner.run(["refunds", "--app", Self.a, "--since", "2026-11-01", "--as-of", Self.morning], environment: s.env)
        #expect(onlyA.stdout.hasPrefix("refund requests signed") && onlyA.stdout.contains(": 0; answered"), "one app: as before: \(onlyA.stdout)")
    }
}
