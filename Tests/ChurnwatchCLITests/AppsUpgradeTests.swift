import Foundation
import Postgres
import Testing

/// Issue 26: a single-app database from before apps were kept (schema 0017) upgrades with
/// `churnwatch migrate`: every row becomes the deployment's app's, and the next night is the
/// same as on a database that never needed the upgrade.
@Suite("apps: a single-app database upgrades (the binary)", .serialized)
struct AppsUpgradeTests {
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    /// The tables migration 0018 gave a `bundle_id`.
    static let appTables = ["subscriptions", "subscription_segments", "segment_changes", "churn_events", "winback_queue",
                            "notifications", "runs", "refund_requests", "quarantine", "segment_daily", "offers", "notification_feed"]

    /// Takes a database back to schema 0017 with its rows (what a deployment of the build
    /// before apps holds): migration 0018 undone by hand, and 0023 (which adds a column to
    /// `apps`) and 0026 (whose triggers read 0023's column) with it, so `migrate` applies them
    /// again in order.
    static let undo0018 = """
        DELETE FROM churnwatch.schema_migrations WHERE name IN ('0018_apps.sql', '0023_observation_sequence.sql', '0026_webhooks.sql');
        DROP TABLE churnwatch.webhook_deliveries, churnwatch.webhook_messages, churnwatch.webhook_consumers, churnwatch.webhook_secrets,
            churnwatch.webhook_endpoints, churnwatch.webhook_instance;
        DROP SEQUENCE churnwatch.webhook_message_seq;
        DROP FUNCTION churnwatch.webhook_on_event, churnwatch.webhook_on_superseded, churnwatch.webhook_on_segment_change,
            churnwatch.webhook_on_cancel_page CASCADE;
        DROP FUNCTION churnwatch.webhook_write, churnwatch.webhook_who, churnwatch.webhook_app, churnwatch.webhook_time;
        DROP TABLE churnwatch.observations;
        ALTER TABLE churnwatch.subscriptions DROP COLUMN observed_as_of, DROP COLUMN observed_named;
        DROP INDEX churnwatch.churn_events_superseded_idx;
        DROP INDEX churnwatch.churn_events_dedupe_idx;
        ALTER TABLE churnwatch.churn_events DROP COLUMN superseded_at;
        CREATE UNIQUE INDEX churn_events_dedupe_idx ON churnwatch.churn_events (original_transaction_id, event, occurred_at);
        DROP INDEX churnwatch.runs_unfinished_idx;
        CREATE INDEX runs_unfinished_idx ON churnwatch.runs (kind, id) WHERE finished_at IS NULL;
        ALTER TABLE churnwatch.segment_daily DROP CONSTRAINT segment_daily_pkey;
        ALTER TABLE churnwatch.segment_daily ADD PRIMARY KEY (day, segment, product_id);
        ALTER TABLE churnwatch.offers DROP CONSTRAINT offers_pkey;
        ALTER TABLE churnwatch.offers ADD PRIMARY KEY (campaign, product_id);
        ALTER TABLE churnwatch.notification_feed DROP CONSTRAINT notification_feed_pkey;
        ALTER TABLE churnwatch.notification_feed ADD PRIMARY KEY (environment);
        CREATE OR REPLACE FUNCTION churnwatch.segment_changes_record() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO churnwatch.segment_changes (original_transaction_id, from_segment, to_segment, changed_at)
            VALUES (NEW.original_transaction_id, OLD.segment, NEW.segment, NEW.segment_since);
            RETURN NULL;
        END;
        $$;
        """ + appTables.map { "ALTER TABLE churnwatch.\($0) DROP COLUMN bundle_id;\n" }.joined() + """
        DROP FUNCTION churnwatch.default_bundle_id();
        DROP TABLE churnwatch.apps;
        """

    @Test("migrate without APPSTORE_BUNDLE_ID refuses in one line (78) and changes nothing; with it, every row is the app's and the next night equals one on a database that never needed the upgrade")
    func upgradeGivesAnIdenticalNight() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 300, seed: 61, start: NightlyRunEndToEndTests.iso(Self.start))
        defer { sim.stop() }
        let current = try await OwnThread.run { try Harness.database(sim: sim) }
        defer { current.db.drop() }
        let night0 = try await Harness.night(Self.start, sim: sim, env: current.env, extra: Self.fast)
        #expect(night0.status == 0, "\(night0.stderr.suffix(300))")
        let upgraded = try await OwnThread.run { try Harness.clone(current, sim: sim) }
        defer { upgraded.db.drop() }
        let old = try PostgresConnection(connectionString: upgraded.db.connectionURL, logger: .postgres)
        try old.runScript(Self.undo0018)
        let rowsBefore = try Self.rowCounts(old)
        #expect(rowsBefore["subscriptions"] == 300 && (rowsBefore["subscription_segments"] ?? 0) == 300, "\(rowsBefore)")

        var noApp = upgraded.env
        noApp["APPSTORE_BUNDLE_ID"] = nil
        let refused = try await CLIRunner.run(["migrate"], environment: noApp)
        #expect(refused.status == 78, "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("set APPSTORE_BUNDLE_ID"), "\(refused.stderr)")
        #expect(try old.query("SELECT to_regclass('churnwatch.apps') IS NULL")[0].decode(Bool.self, at: 0), "0018 changed nothing")

        let migrate = try await CLIRunner.run(["migrate"], environment: upgraded.env)
        #expect(migrate.status == 0 && migrate.stdout.contains("0018_apps.sql"), "\(migrate.stdout) \(migrate.stderr)")
        let app = try #require(upgraded.env["APPSTORE_BUNDLE_ID"])
        for table in Self.appTables {
            let other = try old.query(PostgresQuery(stringLiteral: "SELECT count(*) FROM churnwatch.\(table) WHERE bundle_id IS DISTINCT FROM '\(app)'"))
            #expect(try other[0].decode(Int.self, at: 0) == 0, "\(table): a row not of \(app)")
        }
        #expect(try Self.rowCounts(old) == rowsBefore, "the upgrade keeps every row")
        #expect(try old.query("SELECT bundle_id FROM churnwatch.apps WHERE is_default")[0].decode(String.self, at: 0) == app)

        let night1 = Self.start.addingTimeInterval(Self.day)
        for db in [current, upgraded] {
            let r = try await Harness.night(night1, sim: sim, env: db.env, extra: Self.fast + ["--stale-after", "20h"])
            #expect(r.status == 0, "\(r.stderr.suffix(300))")
        }
        try Harness.expectSameEndState(upgraded.db, current.db, label: "upgraded vs current")
        let runs = "SELECT concat_ws(' ', bundle_id, kind, status, due, polled, failed, events, enqueued, obsoleted) FROM churnwatch.runs ORDER BY id"
        let now = try PostgresConnection(connectionString: current.db.connectionURL, logger: .postgres)
        #expect(try old.query(PostgresQuery(stringLiteral: runs)).map { try $0.decode(String.self, at: 0) }
                == now.query(PostgresQuery(stringLiteral: runs)).map { try $0.decode(String.self, at: 0) })
    }

    static func rowCounts(_ db: PostgresConnection) throws -> [String: Int] {
        var out: [String: Int] = [:]
        for table in appTables + ["transactions", "run_items"] {
            out[table] = try db.query(PostgresQuery(stringLiteral: "SELECT count(*) FROM churnwatch.\(table)"))[0].decode(Int.self, at: 0)
        }
        return out
    }
}
