import ChurnModel
import ChurnReport
@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore.reportRows, built into ReportData (churnwatch report)")
struct ReportDataTests {
    static let t = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC
    static let day: TimeInterval = 86_400
    static let hostile = "<script>alert('x')</script>\"&"

    static func at(days: Double) -> Date { t.addingTimeInterval(days * day) }

    static func event(_ db: PostgresConnection, _ otid: String, _ event: String, occurred: Double, detected: Double) throws {
        try db.execute("""
            INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at)
            VALUES (\(otid), \(event), \(at(days: occurred)), \(at(days: detected)))
            """)
    }

    static func segment(_ db: PostgresConnection, _ otid: String, _ segment: String, since: Double, product: String = "p1") throws {
        try db.execute("""
            INSERT INTO churnwatch.subscription_segments (original_transaction_id, product_id, segment, segment_since)
            VALUES (\(otid), \(product), \(segment), \(at(days: since)))
            ON CONFLICT (original_transaction_id) DO UPDATE SET segment = excluded.segment, segment_since = excluded.segment_since
            """)
    }

    @Test("a database without the churnwatch schema gives an unmigrated report; a migrated empty one an empty report")
    func emptyDatabases() async throws {
        try await FreshDatabase.with { fresh in
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let bare = try await store.reportData(asOf: Self.t, days: 30)
            #expect(!bare.migrated)
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(try fresh.connect())
            let empty = try await store.reportData(asOf: Self.t, days: 30)
            #expect(empty.migrated && empty.isEmpty)
            #expect(empty.revenue == nil)
            #expect(empty.billing.recovery.allSatisfy { $0.observed == 0 })
        }
    }

    @Test("crafted history: segment days in the window, events by detection day, moves recorded by the trigger, billing episodes, queue, runs")
    func craftedHistory() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            for (d, n) in [(-9.0, 5), (-2, 7), (-1, 8), (0, 9)] {
                try db.execute("""
                    INSERT INTO churnwatch.segment_daily (day, segment, product_id, subscriptions) VALUES
                    (\(Self.at(days: d))::date, 'active', \(Self.hostile), \(n)), (\(Self.at(days: d))::date, 'active', '', 1),
                    (\(Self.at(days: d))::date, 'will_not_renew', 'p1', 2)
                    """)
            }
            try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id, customer_ref) VALUES ('a', \(Self.hostile)), ('b', NULL)")
            // Moves: two by the trigger, one outside 7 days, none for an unchanged segment; one after as-of.
            try Self.segment(db, "a", "active", since: -20)
            try Self.segment(db, "a", "will_not_renew", since: -10)
            try Self.segment(db, "a", "active", since: -3)
            try Self.segment(db, "a", "active", since: -3)
            try Self.segment(db, "b", "active", since: -20)
            try Self.segment(db, "b", "will_not_renew", since: -1)
            try Self.segment(db, "b", "churned_voluntary", since: 1)
            // Billing: a recovered after 2 days (retry then grace in one episode), b still in trouble, c expired.
            try Self.event(db, "a", "billing_retry_started", occurred: -5, detected: -5)
            try Self.event(db, "a", "grace_period_started", occurred: -4.5, detected: -4)
            try Self.event(db, "a", "billing_recovered", occurred: -3, detected: -3)
            try Self.event(db, "b", "grace_period_started", occurred: -2, detected: -2)
            try Self.event(db, "c", "billing_retry_started", occurred: -6, detected: -6)
            try Self.event(db, "c", "expired", occurred: -1, detected: -1)
            try Self.event(db, "a", "auto_renew_disabled", occurred: -1.2, detected: -1)
            try Self.event(db, "b", "auto_renew_disabled", occurred: -1.1, detected: -1)
            try Self.event(db, "a", "auto_renew_enabled", occurred: -0.5, detected: 0)
            try Self.event(db, "d", "renewed", occurred: 0.5, detected: 1) // after as-of
            try db.execute("""
                INSERT INTO churnwatch.winback_queue (original_transaction_id, customer_ref, campaign, episode, reason, not_before, status)
                VALUES ('a', \(Self.hostile), 'save_offer', 'e1', 'r', now(), 'pending'), ('b', NULL, 'save_offer', 'e1', 'r', now(), 'done'),
                       ('c', NULL, 'billing_fix', 'e1', 'r', now(), 'pending')
                """)
            let run = try db.query("""
                INSERT INTO churnwatch.runs (kind, as_of, started_at, finished_at, status, due, polled, failed)
                VALUES ('nightly', \(Self.t), \(Self.t), \(Self.at(days: 0.5)), 'done', 10, 9, 1) RETURNING id
                """)[0].decode(Int64.self, at: 0)
            try db.execute("""
                INSERT INTO churnwatch.run_workers (run_id, worker, started_at, seen_at, stats) VALUES
                (\(run), 'w1', \(Self.t), \(Self.t.addingTimeInterval(30)), \(PostgresJSON(text: #"{"calls": {"status": 9, "<b>": 1}, "http_429": 2}"#))),
                (\(run), 'w2', \(Self.t.addingTimeInterval(20)), \(Self.t.addingTimeInterval(40)), \(PostgresJSON(text: #"{"calls": {"status": 1}}"#)))
                """)

            let data = try await ChurnStore(pool: fresh.pool(size: 1), logger: .store).reportData(asOf: Self.t, days: 7)
            #expect(data.subscriptions == 2)
            #expect(data.segmentDays.map(\.day) == ["2026-11-19", "2026-11-20", "2026-11-21"])
            #expect(data.segmentDays.last?.sizes == ["active": 10, "will_not_renew": 2])
            #expect(data.segmentProducts.first == .init(segment: "active", productId: Self.hostile, subscriptions: 9))
            let events = Dictionary(data.events.map { ("\($0.day) \($0.event)", $0.count) }, uniquingKeysWith: +)
            #expect(events["2026-11-20 auto_renew_disabled"] == 2)
            #expect(events["2026-11-21 auto_renew_enabled"] == 1)
            #expect(!data.events.contains { $0.event == "renewed" }, "an event detected after as-of is left out")
            #expect(Set(data.flows.map { "\($0.from)>\($0.to) \($0.last7)/\($0.last30)" })
                    == ["active>will_not_renew 1/2", "will_not_renew>active 1/1"])
            #expect(data.billing.recovery.count == 8)
            // Three episodes: a (first failure day -5, recovered day 2), b (day -2, open), c (day -6, expired).
            #expect(data.billing.recovery[0] == .init(day: 0, observed: 3, recovered: 0))
            #expect(data.billing.recovery[2] == .init(day: 2, observed: 3, recovered: 1))
            #expect(data.billing.recovery[3] == .init(day: 3, observed: 2, recovered: 1))
            #expect(data.billing.recovery[6] == .init(day: 6, observed: 1, recovered: 0))
            #expect(data.billing.recovery[7].observed == 0)
            #expect(Set(data.winback.map { "\($0.campaign) \($0.status) \($0.count)" }) == ["save_offer pending 1", "save_offer done 1", "billing_fix pending 1"])
            #expect(data.runs.count == 1)
            #expect(data.runs.first?.calls == ["status": 10, "<b>": 1])
            #expect(data.runs.first?.http429 == 2)
            #expect(data.runs.first?.durationSeconds == 40)
            #expect(data.runs.first?.polled == 9 && data.runs.first?.failed == 1)
            #expect(data.revenue == nil, "no price known yet")
        }
    }

    @Test("revenue at risk from subscription_segments.renewal_price and renewal_currency (migration 0006): per at-risk segment and currency, unpriced rows left out")
    func revenueWithPrices() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try Self.segment(db, "a", "will_not_renew", since: -1)
            #expect(try await store.reportData(asOf: Self.t, days: 7).revenue == nil, "columns present, no price known")
            try Self.segment(db, "b", "will_not_renew", since: -1)
            try Self.segment(db, "c", "billing_retry", since: -1)
            try Self.segment(db, "d", "active", since: -1)
            try db.execute("""
                UPDATE churnwatch.subscription_segments SET renewal_price = 9990,
                    renewal_currency = CASE original_transaction_id WHEN 'c' THEN \(Self.hostile) ELSE 'USD' END
                WHERE original_transaction_id IN ('a', 'b', 'c', 'd')
                """)
            let revenue = try await store.reportData(asOf: Self.t, days: 7).revenue
            #expect(Set(revenue?.rows.map { "\($0.segment) \($0.currency) \($0.subscriptions) \($0.milliunits)" } ?? [])
                    == ["will_not_renew USD 2 19980", "billing_retry \(Self.hostile) 1 9990"])
        }
    }

    @Test("outcomes per campaign and offer, written by SQL: counts, shares' inputs, median days and revenue kept match independent SQL")
    func outcomes() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            #expect(try await store.reportData(asOf: Self.t, days: 7).outcomes.isEmpty, "no entries, no outcomes")
            let x = Self.hostile
            // (otid, campaign, offer, status, holdout, outcome, days to outcome, price, currency, horizon in days)
            let rows: [(String, String, String?, String, Bool, String?, Double?, Int64?, String?, Double?)] = [
                ("s1", "save_offer", x, "done", false, "saved", 2, 9_990, "USD", 30), ("s2", "save_offer", x, "done", false, "saved", 4, 4_990, "EUR", 30),
                ("s3", "save_offer", x, "claimed", false, "lost", 5, nil, nil, 30), ("s4", "save_offer", x, "pending", false, nil, nil, nil, nil, -1),
                ("s5", "save_offer", x, "pending", false, nil, nil, nil, nil, 10), ("h1", "save_offer", x, "held_out", true, "saved", 1, 9_990, "USD", 30),
                ("h2", "save_offer", x, "held_out", true, "lost", 6, nil, nil, 30), ("h3", "save_offer", x, "held_out", true, "lost", 7, nil, nil, 30),
                ("b1", "billing_fix", nil, "done", false, "saved", 3, 1_000, "USD", 30),
            ]
            for r in rows {
                try db.execute("""
                    INSERT INTO churnwatch.winback_queue (original_transaction_id, campaign, episode, reason, not_before, status, offer_id, holdout,
                        outcome, outcome_at, outcome_price, outcome_currency, expires_at, opened_at)
                    VALUES (\(r.0), \(r.1), 'e1', 'r', \(Self.t), \(r.3), \(r.2), \(r.4), \(r.5), \(r.6.map { Self.at(days: $0) }), \(r.7), \(r.8),
                            \(r.9.map { Self.at(days: $0) }), \(Self.t))
                    """)
            }
            let outcomes = try await store.reportData(asOf: Self.t, days: 7).outcomes
            #expect(outcomes.map(\.campaign) == ["billing_fix", "save_offer"])
            #expect(outcomes.last == .init(campaign: "save_offer", offerId: x, entries: 5, delivered: 2, decided: 4, saved: 2, holdoutEntries: 3,
                                           holdoutDecided: 3, holdoutSaved: 1, medianDaysToSave: 3, revenueKept: ["USD": 9_990, "EUR": 4_990]))
            // The same figures from SQL written here: per group and arm, an entry is decided when it has an
            // outcome or its horizon (a save offer's plus the day a renewal may take) passed by the as-of time.
            for row in try db.query("""
                SELECT campaign, offer_id, holdout, count(*), sum((status = 'done')::int), sum((outcome IS NOT NULL OR expires_at + CASE WHEN campaign = 'save_offer' THEN interval '1 day' ELSE interval '0' END <= \(Self.t))::int),
                       sum((outcome = 'saved')::int)
                FROM churnwatch.winback_queue GROUP BY 1, 2, 3
                """) {
                let (campaign, offer, holdout) = (try row.decode(String.self, at: 0), try row.decode(String?.self, at: 1), try row.decode(Bool.self, at: 2))
                let o = try #require(outcomes.first { $0.campaign == campaign && $0.offerId == offer })
                let n = try row.decode(Int.self, at: 3), done = try row.decode(Int.self, at: 4)
                let decided = try row.decode(Int.self, at: 5), saved = try row.decode(Int.self, at: 6)
                if holdout {
                    #expect([o.holdoutEntries, o.holdoutDecided, o.holdoutSaved] as [Int] == [n, decided, saved])
                } else {
                    #expect([o.entries, o.delivered, o.decided, o.saved] as [Int] == [n, done, decided, saved])
                }
            }
            for row in try db.query("""
                SELECT campaign, offer_id, outcome_currency, sum(outcome_price)::bigint FROM churnwatch.winback_queue
                WHERE NOT holdout AND outcome = 'saved' GROUP BY 1, 2, 3
                """) {
                let o = try #require(outcomes.first { $0.campaign == (try? row.decode(String.self, at: 0)) && $0.offerId == (try? row.decode(String?.self, at: 1)) })
                #expect(o.revenueKept[try row.decode(String.self, at: 2)] == (try row.decode(Int64.self, at: 3)))
            }
            let median = try db.query("""
                SELECT campaign, percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM outcome_at - opened_at) / 86400)
                FROM churnwatch.winback_queue WHERE NOT holdout AND outcome = 'saved' GROUP BY 1 ORDER BY 1
                """).map { try $0.decode(Double.self, at: 1) }
            #expect(outcomes.map(\.medianDaysToSave) == median)
        }
    }

    @Test("experiments: one running at the as-of time has its allocations up to then and its readout; one stopped before the window is left out")
    func experiments() async throws {
        try await FreshDatabase.with { fresh in
            _ = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let t0 = ExperimentStoreTests.t0, day = Self.day
            #expect(try await store.reportData(asOf: t0, days: 7).experiments.isEmpty)
            try await store.retentionRuleSet(RetentionRule(name: "everyone", kind: .message, messageId: ExperimentStoreTests.m1))
            try await store.experimentAdd(ExperimentStoreTests.experiment(), by: "test")
            try await store.experimentAllocate("exp", after: 0, at: t0 + day, by: "test", reason: "reallocated",
                                               weights: ["a": 0.2, "b": 0.8], previous: ["a": 0.5, "b": 0.5], posterior: nil)
            try await store.retentionRecord([
                ExperimentStoreTests.record(UUID(), "s-1", at: t0 + 60, arm: "a", period: 0),
                ExperimentStoreTests.record(UUID(), "s-2", at: t0 + 120, arm: "holdout", period: 0),
                ExperimentStoreTests.record(UUID(), "s-3", at: t0 + 1.5 * day, arm: "b", period: 1),
            ])
            let x = try #require(try await store.reportData(asOf: t0 + 2 * day, days: 7).experiments.first)
            #expect(x.name == "exp" && x.rule == "everyone" && x.allocation == .adaptive && x.holdout == 0.2 && x.running && x.stoppedAt == nil)
            #expect(x.history.map(\.period) == [0, 1] && x.history[1].at == t0 + day && x.history[1].weights == ["a": 0.2, "b": 0.8])
            #expect(x.history[1].reason == "reallocated" && x.history[1].by == "test")
            #expect(x.readout.arms.map(\.arm) == ["a", "b", "holdout"])
            #expect(x.readout.arms.map(\.exposed) == [1, 1, 1] && x.readout.arms.map(\.weightNow) == [0.2, 0.8, nil])
            // As of before the reallocation: period 0 alone, its weights the current ones, b not exposed yet.
            let early = try #require(try await store.reportData(asOf: t0 + 0.5 * day, days: 7).experiments.first)
            #expect(early.history.map(\.period) == [0] && early.readout.arms.map(\.weightNow) == [0.5, 0.5, nil])
            #expect(early.readout.arms.map(\.exposed) == [1, 0, 1])

            try await store.experimentStop("exp", keep: nil, at: t0 + 3 * day)
            #expect(try await store.reportData(asOf: t0 + 2.5 * day, days: 7).experiments.first?.running == true, "running at the as-of time")
            let stopped = try #require(try await store.reportData(asOf: t0 + 5 * day, days: 7).experiments.first)
            #expect(!stopped.running && stopped.stoppedAt == t0 + 3 * day)
            #expect(try await store.reportData(asOf: t0 + 11 * day, days: 7).experiments.isEmpty, "stopped before the window")
        }
    }
}

extension ChurnStore {
    /// The report's page data as `churnwatch report` builds it: the store's rows, grouped by
    /// the report module.
    func reportData(asOf: Date, days: Int) async throws -> ReportData {
        ReportData(try await reportRows(asOf: asOf, days: days))
    }
}
