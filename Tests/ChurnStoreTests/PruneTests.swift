import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// `prune`: what each table keeps (docs/contracts.md, "Retention"), in batches, resumable.
@Suite("ChurnStore prune")
struct PruneTests {
    static let asOf = Date(timeIntervalSince1970: 1_795_255_200)  // 2026-11-21 02:00 UTC
    static let day: TimeInterval = 86_400

    /// Old and recent rows in every pruned table, and rows of what is kept forever.
    static func seed(_ db: PostgresConnection) throws {
        func run(_ daysAgo: Double, finished: Bool) throws -> Int64 {
            let at = asOf.addingTimeInterval(-daysAgo * day)
            return try db.query("""
                INSERT INTO churnwatch.runs (kind, as_of, status, finished_at)
                VALUES ('nightly', \(at), \(finished ? "done" : "interrupted"), \(finished ? at : nil))
                RETURNING id
                """)[0].decode(Int64.self, "id")
        }
        let old = try run(100, finished: true), unfinished = try run(90, finished: false), newest = try run(60, finished: true)
        for (id, n) in [(old, 7), (unfinished, 5), (newest, 3)] {
            try db.execute("""
                INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status)
                SELECT \(id), 'otid' || g, 'period_end', 'done' FROM generate_series(1, \(n)) AS g
                """)
            try db.execute("INSERT INTO churnwatch.run_workers (run_id, worker) VALUES (\(id), 'w')")
        }
        // Notifications: 4 signed 300 days ago, 2 signed 10 days ago, 1 quarantined (no date) written now.
        for (i, daysAgo) in [300.0, 300, 300, 300, 10, 10].enumerated() {
            try db.execute("""
                INSERT INTO churnwatch.notifications (notification_uuid, notification_type, signed_date, original_transaction_id, source, outcome)
                VALUES (\(UUID()), 'DID_RENEW', \(asOf.addingTimeInterval(-daysAgo * day)), 'n\(i)', 'history', 'applied')
                """)
        }
        try db.execute("INSERT INTO churnwatch.notifications (source, outcome, reason) VALUES ('ingest', 'quarantined', 'bad')")
        try db.execute("INSERT INTO churnwatch.notification_inbox (signed_payload, processed_at) VALUES ('a', now() - interval '40 days'), ('b', now()), ('c', NULL)")
        try db.execute("INSERT INTO churnwatch.quarantine (endpoint, reason, payload, received_at) VALUES ('x', 'r', 'p', now() - interval '100 days'), ('x', 'r', 'p', now())")
        try db.execute("""
            INSERT INTO churnwatch.segment_changes (original_transaction_id, from_segment, to_segment, changed_at)
            VALUES ('s', 'active', 'will_not_renew', \(asOf.addingTimeInterval(-500 * day))), ('s', 'will_not_renew', 'active', \(asOf))
            """)
        // Cancel-page requests: one signed 500 days ago (past 400), one now.
        try db.execute("""
            INSERT INTO churnwatch.retention_message_requests (request_identifier, bundle_id, original_transaction_id, product_id,
                user_locale, environment, signed_at, arm, facts_known)
            VALUES (gen_random_uuid(), 'com.example.churnwatch', 's', 'p', 'en-US', 'Production', \(asOf.addingTimeInterval(-500 * day)), 'no_rule', true),
                   (gen_random_uuid(), 'com.example.churnwatch', 's', 'p', 'en-US', 'Production', \(asOf), 'no_rule', true)
            """)
        // Observations kept for late notifications: one whose successor was signed 8 days ago
        // (past the 7), one whose successor was signed yesterday.
        for (signed, next) in [(10.0, 8.0), (2.0, 1.0)] {
            try db.execute("""
                INSERT INTO churnwatch.observations (original_transaction_id, signed_date, as_of, next_signed_date, snapshot, bundle_id)
                VALUES ('s', \(asOf.addingTimeInterval(-signed * day)), \(asOf.addingTimeInterval(-signed * day)),
                        \(asOf.addingTimeInterval(-next * day)), '{}', 'com.example.churnwatch')
                """)
        }
        // Webhook messages: two written 40 days ago (past the 30), one of them still pending for
        // an endpoint (kept: never lost to prune), one written now.
        try db.execute("INSERT INTO churnwatch.webhook_endpoints (name, bundle_id, url) VALUES ('crm', 'com.example.churnwatch', 'https://example.com/h')")
        try db.execute("""
            INSERT INTO churnwatch.webhook_messages (id, seq, bundle_id, type, body, created_at)
            VALUES (1, 1, 'com.example.churnwatch', 'segment.changed', '{}', now() - interval '40 days'),
                   (2, 2, 'com.example.churnwatch', 'segment.changed', '{}', now() - interval '40 days'),
                   (3, 3, 'com.example.churnwatch', 'segment.changed', '{}', now())
            """)
        try db.execute("""
            INSERT INTO churnwatch.webhook_deliveries (endpoint, message_id, seq, original_transaction_id, state)
            VALUES ('crm', 1, 1, '', 'delivered'), ('crm', 2, 2, '', 'pending'), ('crm', 3, 3, '', 'delivered')
            """)
        // Transactions of one subscription: two periods that ended 500 days ago (one is still its
        // newest, as the subscription row says), one that ended last week.
        try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id, latest_transaction_id) VALUES ('s', 't-newest'), ('u', 't-u2')")
        for (id, otid, daysAgo) in [("t-old", "s", 500.0), ("t-newest", "s", 500), ("t-u1", "u", 500), ("t-u2", "u", 7)] {
            try db.execute("""
                INSERT INTO churnwatch.transactions (transaction_id, original_transaction_id, product_id, expires_date, payload)
                VALUES (\(id), \(otid), 'p', \(asOf.addingTimeInterval(-daysAgo * day)), '{}')
                """)
        }
    }

    static func counts(_ db: PostgresConnection) throws -> [String: Int] {
        var out: [String: Int] = [:]
        for table in ["run_items", "run_workers", "notifications", "notification_inbox", "quarantine", "segment_changes", "transactions",
                      "retention_message_requests", "observations", "runs", "subscriptions", "webhook_messages"] {
            out[table] = try db.query("SELECT count(*) FROM churnwatch.\(identifier: table)")[0].decode(Int.self, at: 0)
        }
        return out
    }

    @Test("a dry run counts what a prune removes; the prune removes it in batches and keeps everything else; a second removes nothing")
    func prunesWhatThePolicyNoLongerKeeps() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            try Self.seed(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let before = try Self.counts(db)
            let dry = try await store.database.prune(RetentionPolicy(), asOf: Self.asOf, now: Date(), dryRun: true)
            #expect(try Self.counts(db) == before, "a dry run changes nothing")
            let expected = ["run_items": 7, "run_workers": 1, "notifications": 4, "notification_inbox": 1, "quarantine": 1,
                            "segment_changes": 1, "retention_message_requests": 1, "transactions": 2, "observations": 1,
                            "webhook_messages": 1]
            #expect(Dictionary(uniqueKeysWithValues: dry.rows.map { ($0.table, $0.rows) }) == expected)
            #expect(try db.query("SELECT count(*) FROM churnwatch.apps WHERE observations_pruned_before IS NOT NULL")[0].decode(Int.self, at: 0) == 0,
                    "a dry run records no cut")

            let done = try await store.database.prune(RetentionPolicy(), asOf: Self.asOf, now: Date(), dryRun: false, batch: 2)
            #expect(Dictionary(uniqueKeysWithValues: done.rows.map { ($0.table, $0.rows) }) == expected)
            #expect(done.statements > expected.values.reduce(0, +) / 2, "batches of 2: \(done.statements) statements")
            let after = try Self.counts(db)
            for (table, n) in expected { #expect(after[table] == before[table]! - n, "\(table)") }
            #expect(after["runs"] == 3 && after["subscriptions"] == 2, "runs and subscriptions are kept forever")
            // The cut is recorded: a late notification before every kept observation may have lost its predecessor.
            let cut = try db.query("SELECT observations_pruned_before FROM churnwatch.apps")[0].decode(Date?.self, at: 0)
            #expect(cut == Self.asOf.addingTimeInterval(-7 * Self.day), "\(String(describing: cut))")
            let items = try db.query("SELECT DISTINCT r.status FROM churnwatch.run_items i JOIN churnwatch.runs r ON r.id = i.run_id ORDER BY 1")
                .map { try $0.decode(String.self, at: 0) }
            #expect(items == ["done", "interrupted"], "the unfinished run's items and the newest finished run's stay")
            let kept = try db.query("SELECT transaction_id FROM churnwatch.transactions ORDER BY 1").map { try $0.decode(String.self, at: 0) }
            #expect(kept == ["t-newest", "t-u2"], "a subscription's newest transaction stays, however old")

            let again = try await store.database.prune(RetentionPolicy(), asOf: Self.asOf, now: Date(), dryRun: false)
            #expect(again.total == 0)
        }
    }

    @Test("a prune asked to stop stops before its next statement and removes nothing more")
    func stopsOnRequest() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            try Self.seed(db)
            let before = try Self.counts(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let stopped = try await store.database.prune(RetentionPolicy(), asOf: Self.asOf, now: Date(), dryRun: false, shouldStop: { true })
            #expect(stopped.stopped && stopped.total == 0)
            #expect(try Self.counts(db) == before)
        }
    }

    @Test func aRetentionBelowItsFloorIsRefusedNamingTheTableAndWhy() throws {
        var policy = RetentionPolicy()
        #expect(throws: RetentionPolicyError.self) { try policy.set(.notifications, 30 * Self.day) }
        do {
            try policy.set(.runItems, Self.day)
        } catch {
            #expect(error.description.hasPrefix("run_items must be kept at least 2 days, not 1 days"), "\(error)")
        }
        try policy.set(.notifications, 365 * Self.day)
        #expect(policy[.notifications] == 365 * Self.day && policy[.quarantine] == 90 * Self.day)
    }
}
