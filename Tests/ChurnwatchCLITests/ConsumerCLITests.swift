import Foundation
import Postgres
import Testing

/// A migrated scratch database and a connection to it, for the consumer commands.
private struct MigratedScratch {
    let db: ScratchDatabase
    let connection: PostgresConnection
    var env: [String: String] { ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"] }

    static func make() async throws -> MigratedScratch {
        let db = try ScratchDatabase.create()
        let r = try await CLIRunner.run(["migrate"], environment: ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"])
        guard r.status == 0 else { db.drop(); throw CLITestError("migrate failed: \(r.stderr)") }
        return MigratedScratch(db: db, connection: try PostgresConnection(connectionString: db.connectionURL, logger: .postgres))
    }
}

@Suite("churnwatch winback, status, segments (the binary)")
struct ConsumerCLITests {
    @Test("winback claim prints JSON lines; ack exits 65 naming ids it could not ack; release gives entries back")
    func winback() async throws {
        let s = try await MigratedScratch.make()
        defer { s.db.drop() }
        for (otid, hoursAgo) in [("7001", 3), ("7002", 2), ("7003", 1)] {
            try s.connection.execute("""
                INSERT INTO churnwatch.winback_queue (original_transaction_id, app_account_token, campaign, episode, product_id,
                    reason, offer_ids, not_before, expires_at, opened_at)
                VALUES (\(otid), '7b0a3c5e-0000-4000-8000-000000000001', 'winback_offer', 'e1', 'pro', 'churned_voluntary',
                    '{wb.a,wb.b}', timestamptz '2026-11-21 02:00:00+00' - make_interval(hours => \(Int32(hoursAgo))), '2027-01-01 00:00:00+00',
                    '2026-11-19 02:00:00+00')
                """)
        }
        let claim = try await CLIRunner.run(["winback", "claim", "--campaign", "winback_offer", "--consumer", "mailer",
                                       "--limit", "2", "--lease", "10m", "--as-of", "2026-11-21T02:00:00Z"], environment: s.env)
        #expect(claim.status == 0, "\(claim.stderr)")
        let lines = claim.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        let objects = try lines.map { try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects.map { $0["original_transaction_id"] as? String } == ["7001", "7002"])
        let first = try #require(objects.first)
        #expect(first["campaign"] as? String == "winback_offer")
        #expect(first["offer_ids"] as? [String] == ["wb.a", "wb.b"])
        #expect(first["claimed_by"] as? String == "mailer")
        #expect(first["claim_expires_at"] as? String == "2026-11-21T02:10:00Z")
        #expect(first["not_before"] as? String == "2026-11-20T23:00:00Z")
        #expect(first["opened_at"] as? String == "2026-11-19T02:00:00Z", "the night it was opened, not when the row was written")
        #expect(first["app_account_token"] as? String == "7b0a3c5e-0000-4000-8000-000000000001")
        #expect(first["customer_ref"] is NSNull, "absent values are null, not missing")
        let ids = objects.compactMap { ($0["id"] as? NSNumber)?.int64Value }
        #expect(ids.count == 2)

        let ack = try await CLIRunner.run(["winback", "ack", "--consumer", "mailer", String(ids[0]), "424242"], environment: s.env)
        #expect(ack.status == 65)
        #expect(ack.stdout.contains("acked 1"))
        #expect(ack.stderr.split(separator: "\n").count == 1)
        #expect(ack.stderr.contains("424242 (unknown)"), "\(ack.stderr)")

        let release = try await CLIRunner.run(["winback", "release", String(ids[1])], environment: s.env)
        #expect(release.status == 0, "\(release.stderr)")
        #expect(release.stdout.contains("released 1"))
        let statuses = try s.connection.query("SELECT status FROM churnwatch.winback_queue ORDER BY not_before").map { try $0.decode(String.self, at: 0) }
        #expect(statuses == ["done", "pending", "pending"])

        let badCampaign = try await CLIRunner.run(["winback", "claim", "--campaign", "spam", "--consumer", "m"], environment: s.env)
        #expect(badCampaign.status == 78)
        #expect(badCampaign.stderr.split(separator: "\n").count == 1 && badCampaign.stderr.contains("save_offer"))
        let badId = try await CLIRunner.run(["winback", "ack", "12x"], environment: s.env)
        #expect(badId.status == 78 && badId.stderr.contains("\"12x\""))
    }

    @Test("status says so when there is no run, then shows a run as text and as one JSON object")
    func status() async throws {
        let s = try await MigratedScratch.make()
        defer { s.db.drop() }
        let none = try await CLIRunner.run(["status"], environment: s.env)
        #expect(none.status == 0, "\(none.stderr)")
        #expect(none.stdout == "no runs yet\n")
        let noneJSON = try await CLIRunner.run(["status", "--json"], environment: s.env)
        let noRun = try #require(JSONSerialization.jsonObject(with: Data(noneJSON.stdout.utf8)) as? [String: Any])
        #expect(noRun["run"] is NSNull && (noRun["apps"] as? [[String: Any]])?.first?["run"] is NSNull, "\(noneJSON.stdout)")

        let id = try s.connection.query("""
            INSERT INTO churnwatch.runs (kind, as_of, started_at, status, due)
            VALUES ('nightly', '2026-11-21 02:00:00+00', '2026-11-21 02:00:00+00', 'running', 4) RETURNING id
            """)[0].decode(Int64.self, at: 0)
        try s.connection.execute("""
            INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status, outcome, failure_class)
            VALUES (\(id), 'a', 'new', 'done', 'ok', NULL), (\(id), 'b', 'new', 'failed', 'not found: b', 'not_found'),
                   (\(id), 'c', 'new', 'pending', NULL, NULL), (\(id), 'd', 'new', 'pending', NULL, NULL)
            """)
        try s.connection.execute("""
            INSERT INTO churnwatch.run_workers (run_id, worker, started_at, seen_at, stats)
            VALUES (\(id), 'host:1', '2026-11-21 02:00:00+00', '2026-11-21 02:00:20+00', '{"calls": {"status": 30, "history": 10}}')
            """)
        let text = try await CLIRunner.run(["status", "--as-of", "2026-11-21T02:00:30Z"], environment: s.env)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("run \(id) (nightly, as of 2026-11-21T02:00:00Z): running"))
        #expect(text.stdout.contains("items: 2 of 4 finished (50.0%): 1 polled, 1 failed (not found 1)"))
        #expect(text.stdout.contains("Apple calls: 40 (history 10, status 30), 2.0/s over 20s of work"))
        #expect(text.stdout.contains("ETA: 20s at 0.1 items/s"))

        let json = try await CLIRunner.run(["status", String(id), "--json", "--as-of", "2026-11-21T02:00:30Z"], environment: s.env)
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let items = try #require(object["items"] as? [String: Any])
        #expect(items["finished"] as? Int == 2 && items["total"] as? Int == 4)
        #expect(items["failed_by_reason"] as? [String: Int] == ["not found": 1])
        let calls = try #require(object["calls"] as? [String: Any])
        #expect(calls["total"] as? Int == 40 && calls["per_second"] as? Double == 2)
        #expect(object["eta_seconds"] as? Double == 20)
        // One app: the same object, its app named, and the list of apps holds it alone.
        #expect(object["bundle_id"] as? String == "com.example.churnwatch")
        let apps = try #require(object["apps"] as? [[String: Any]])
        #expect(apps.count == 1 && apps[0]["bundle_id"] as? String == "com.example.churnwatch")
        #expect((apps[0]["run"] as? [String: Any])?["id"] as? Int == Int(id) && (apps[0]["items"] as? [String: Any])?["finished"] as? Int == 2)

        let missing = try await CLIRunner.run(["status", "999"], environment: s.env)
        #expect(missing.status == 65 && missing.stderr == "churnwatch: no run 999\n")
    }

    @Test("segments --csv prints every segment with its change since the previous day")
    func segmentsCSV() async throws {
        let s = try await MigratedScratch.make()
        defer { s.db.drop() }
        try s.connection.execute("""
            INSERT INTO churnwatch.subscription_segments (original_transaction_id, product_id, segment, segment_since)
            VALUES ('a', 'pro', 'active', now()), ('b', 'pro', 'active', now()), ('c', 'pro', 'will_not_renew', now())
            """)
        try s.connection.execute("""
            INSERT INTO churnwatch.segment_daily (day, segment, product_id, subscriptions)
            VALUES ('2026-11-20', 'active', 'pro', 5), ('2026-11-20', 'will_not_renew', 'pro', 1)
            """)
        let r = try await CLIRunner.run(["segments", "--csv", "--day", "2026-11-21"], environment: s.env)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        // bundle_id last (issue 26): a column added, none renamed or moved.
        #expect(lines.first == "segment,subscriptions,change,bundle_id")
        #expect(lines.count == 14)
        #expect(lines.dropFirst().first == "refunded,0,0,com.example.churnwatch")
        #expect(lines.contains("active,2,-3,com.example.churnwatch"))
        #expect(lines.contains("will_not_renew,1,0,com.example.churnwatch"))
        #expect(lines.last == "unknown,0,0,com.example.churnwatch")

        let table = try await CLIRunner.run(["segments", "--day", "2026-11-20"], environment: s.env)
        #expect(table.status == 0)
        #expect(table.stdout.contains("no earlier day in segment_daily"))
        let badDay = try await CLIRunner.run(["segments", "--day", "yesterday"], environment: s.env)
        #expect(badDay.status == 78 && badDay.stderr.split(separator: "\n").count == 1)
    }
}
