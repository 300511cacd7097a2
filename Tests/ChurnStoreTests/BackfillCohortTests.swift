import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore backfill cohorts and worker liveness")
struct BackfillCohortTests {
    static let asOf = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC
    static let day: TimeInterval = 86_400

    /// One subscription per row; nil product means never polled (no transactions, no segment row).
    struct Row {
        var id: String
        var product: String?
        var group: String?
        var environment = "Production"
        var purchased: TimeInterval?   // original purchase, relative to asOf
        var segment: String?
        var receipt = false
    }

    static let rows: [Row] = [
        Row(id: "1001", product: "premium.monthly", group: "g1", purchased: -40 * day, segment: "active"),
        Row(id: "1002", product: "premium.monthly", group: "g1", purchased: -10 * day, segment: "will_not_renew"),
        Row(id: "1003", product: "premium.yearly", group: "g1", purchased: -400 * day, segment: "billing_retry"),
        Row(id: "1004", product: "storage.monthly", group: "g2", purchased: -10 * day, segment: "active"),
        Row(id: "1005", product: "storage.monthly", group: "g2", environment: "Sandbox", purchased: -5 * day, segment: "churned_voluntary"),
        Row(id: "1006", product: "premium.monthly", group: "g1", purchased: -20 * day, segment: "active", receipt: true),
        Row(id: "2001", product: nil, segment: nil),
        Row(id: "2002", product: nil, environment: "Sandbox", segment: nil),
    ]

    static func seed(_ db: PostgresConnection) throws {
        try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
        for r in rows {
            let polled = r.product != nil
            try db.execute("""
                INSERT INTO churnwatch.subscriptions (original_transaction_id, environment, product_id, subscription_group_id,
                    receipt_data, last_success_at, expires_at)
                VALUES (\(r.id), \(r.environment), \(r.product), \(r.group), \(r.receipt ? "UkVDRUlQVA==" : nil),
                        \(polled ? asOf.addingTimeInterval(-day) : nil), \(polled ? asOf.addingTimeInterval(10 * day) : nil))
                """)
            if let purchased = r.purchased, let product = r.product {
                // Two transactions of the same subscription: the cohort counts it once.
                for k in 1...2 {
                    try db.execute("""
                        INSERT INTO churnwatch.transactions (transaction_id, original_transaction_id, product_id, original_purchase_date,
                            purchase_date, payload)
                        VALUES (\(r.id + "-\(k)"), \(r.id), \(product), \(asOf.addingTimeInterval(purchased)),
                                \(asOf.addingTimeInterval(purchased + Double(k) * day)), '{}')
                        """)
                }
            }
            if let segment = r.segment {
                try db.execute("""
                    INSERT INTO churnwatch.subscription_segments (original_transaction_id, product_id, segment, segment_since)
                    VALUES (\(r.id), \(r.product), \(segment), \(asOf))
                    """)
            }
        }
    }

    static func cohort(_ edit: (inout BackfillCohort) -> Void) -> BackfillCohort {
        var c = BackfillCohort()
        edit(&c)
        return c
    }

    static let cases: [(String, BackfillCohort, Set<String>)] = [
        ("all", cohort { $0.all = true }, Set(rows.map(\.id))),
        ("product", cohort { $0.productIds = ["premium.monthly"] }, ["1001", "1002", "1006"]),
        ("two products", cohort { $0.productIds = ["premium.yearly", "storage.monthly"] }, ["1003", "1004", "1005"]),
        ("group", cohort { $0.groupId = "g2" }, ["1004", "1005"]),
        ("purchased within 30 days", cohort { $0.purchasedFrom = asOf.addingTimeInterval(-30 * day); $0.purchasedBefore = asOf }, ["1002", "1004", "1005", "1006"]),
        ("purchased before 30 days ago", cohort { $0.purchasedBefore = asOf.addingTimeInterval(-30 * day) }, ["1001", "1003"]),
        ("purchase range bounds: from inclusive, to exclusive",
         cohort { $0.purchasedFrom = asOf.addingTimeInterval(-20 * day); $0.purchasedBefore = asOf.addingTimeInterval(-10 * day) }, ["1006"]),
        ("ids (unknown ones left out)", cohort { $0.ids = ["1003", "2001", "9999"] }, ["1003", "2001"]),
        ("segment", cohort { $0.segments = [.active] }, ["1001", "1004", "1006"]),
        ("segment unknown: never polled", cohort { $0.segments = [.unknown] }, ["2001", "2002"]),
        ("environment", cohort { $0.environment = .sandbox }, ["1005", "2002"]),
        ("all AND environment: all adds nothing", cohort { $0.all = true; $0.environment = .sandbox }, ["1005", "2002"]),
        ("product AND purchased AND segment",
         cohort { $0.productIds = ["premium.monthly"]; $0.purchasedFrom = asOf.addingTimeInterval(-30 * day); $0.segments = [.active, .willNotRenew] },
         ["1002", "1006"]),
        ("group AND environment", cohort { $0.groupId = "g2"; $0.environment = .production }, ["1004"]),
        ("ids AND product: never-polled ids drop out", cohort { $0.ids = ["1001", "2001"]; $0.productIds = ["premium.monthly"] }, ["1001"]),
        ("nothing matches", cohort { $0.productIds = ["gone"] }, []),
    ]

    @Test("each selector, and selectors together (AND), plan exactly their cohort into a backfill run")
    func selectors() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Self.seed(db)
            let store = ChurnStore(pool: fresh.pool(size: 2), logger: .store)
            for (name, cohort, expected) in Self.cases {
                let counts = try await store.backfillCount(cohort, asOf: Self.asOf)
                #expect(counts.total == expected.count, "\(name): counted \(counts.total)")
                let params = try StoredJSON(encoding: BackfillParams(cohort: cohort, fullHistory: false))
                let run = try await store.runCreateBackfill(asOf: Self.asOf, cohort: cohort, params: params)
                #expect(run.kind == .backfill && run.due == expected.count, "\(name)")
                let planned = Set(try db.query("SELECT original_transaction_id FROM churnwatch.run_items WHERE run_id = \(run.id)")
                    .map { try $0.decode(String.self, at: 0) })
                #expect(planned == expected, "\(name): planned \(planned.sorted())")
                let reasons = Set(try db.query("SELECT DISTINCT reason FROM churnwatch.run_items WHERE run_id = \(run.id)").map { try $0.decode(String.self, at: 0) })
                #expect(reasons.isSubset(of: ["backfill"]))
                // Close it, so the next case is the only unfinished backfill.
                try db.execute("UPDATE churnwatch.runs SET finished_at = now(), status = 'done' WHERE id = \(run.id)")
            }
        }
    }

    @Test("the dry-run counts: never polled, legacy receipts, likely history calls, ids not registered")
    func counts() async throws {
        try await FreshDatabase.with { fresh in
            try Self.seed(try fresh.connect())
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let all = try await store.backfillCount(Self.cohort { $0.all = true }, asOf: Self.asOf)
            // 1006 has a receipt and its id: it is polled through the Server API (issue 19).
            #expect(all.total == 8 && all.neverPolled == 2 && all.receiptOnly == 0)
            // Never polled (2) need a history call; the others' periods have not ended.
            #expect(all.likelyHistory == 2)
            // Registered with a receipt alone: verifyReceipt (to learn the id), no history call.
            try fresh.connect().execute("""
                INSERT INTO churnwatch.subscriptions (original_transaction_id, receipt_data) VALUES ('receipt:abc', 'UkVDRUlQVA==')
                """)
            let withPlaceholder = try await store.backfillCount(Self.cohort { $0.all = true }, asOf: Self.asOf)
            #expect(withPlaceholder.total == 9 && withPlaceholder.receiptOnly == 1 && withPlaceholder.likelyHistory == 2)
            let ids = try await store.backfillCount(Self.cohort { $0.ids = ["1001", "nope", "nope", "also-nope"] }, asOf: Self.asOf)
            #expect(ids.total == 1 && ids.idsNotRegistered == 2)
        }
    }

    @Test("--environment: a subscription registered without one (NULL) is in the configured environment")
    func environmentNullIsTheConfiguredOne() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Self.seed(db)
            try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id) VALUES ('3001')")
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let sandboxDeployment = try await store.backfillCount(Self.cohort {
                $0.environment = .sandbox; $0.configuredEnvironment = .sandbox
            }, asOf: Self.asOf)
            #expect(sandboxDeployment.total == 3, "1005, 2002 and the row without an environment")
            let production = try await store.backfillCount(Self.cohort { $0.environment = .sandbox }, asOf: Self.asOf)
            #expect(production.total == 2)
            let productionRows = try await store.backfillCount(Self.cohort { $0.environment = .production }, asOf: Self.asOf)
            #expect(productionRows.total == 7, "six registered as Production and the row without one")
        }
    }

    @Test("the stored record recognises the same cohort (ids in any order) and tells another apart")
    func sameWork() throws {
        let a = BackfillParams(cohort: Self.cohort { $0.ids = ["3", "1", "2"]; $0.productIds = ["b", "a"] }, fullHistory: true)
        let b = BackfillParams(cohort: Self.cohort { $0.ids = ["1", "2", "3", "2"]; $0.productIds = ["a", "b"] }, fullHistory: true)
        let c = BackfillParams(cohort: Self.cohort { $0.ids = ["1", "2", "4"]; $0.productIds = ["a", "b"] }, fullHistory: true)
        #expect(a.sameWork(as: b))
        #expect(!a.sameWork(as: c))
        #expect(!a.sameWork(as: BackfillParams(cohort: Self.cohort { $0.ids = ["1", "2", "3"]; $0.productIds = ["a", "b"] }, fullHistory: false)))
        // Through JSON, as it is kept in runs.params.
        let stored = try StoredJSON(encoding: a).decode(BackfillParams.self)
        #expect(stored.sameWork(as: b))
        #expect(Self.cohort { _ in }.hasSelector == false)
        #expect(Self.cohort { $0.segments = [.unknown] }.hasSelector)
    }

    @Test("items of a worker whose lock is gone come back at once; a live worker keeps its items; orphans of our own claims come back")
    func deadWorkers() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Self.seed(db)
            let store = ChurnStore(pool: fresh.pool(size: 2), logger: .store)
            let run = try await store.runCreateBackfill(asOf: Self.asOf, cohort: Self.cohort { $0.all = true },
                                                        params: try StoredJSON(encoding: BackfillParams(cohort: Self.cohort { $0.all = true }, fullHistory: false)))
            // Two workers, each on a connection of its own holding its worker lock.
            var alive: PostgresConnection? = try fresh.connect()
            var dying: PostgresConnection? = try fresh.connect()
            #expect(try alive!.tryAdvisoryLock(ChurnStore.workerLockKey("alive")))
            #expect(try dying!.tryAdvisoryLock(ChurnStore.workerLockKey("dying")))
            let a = try await store.runItemsClaim(runId: run.id, worker: "alive", limit: 3, lease: 120)
            let d = try await store.runItemsClaim(runId: run.id, worker: "dying", limit: 3, lease: 120)
            #expect(a.count == 3 && d.count == 3)
            #expect(try await store.runItemsRecoverDead(runId: run.id) == 0, "both are alive")
            #expect(try await store.runLockHeld(.backfill) == false)

            let dyingPid = dying!.backendPID
            dying = nil // the connection closes: PostgreSQL drops its locks
            var gone = false
            for _ in 0..<2000 where !gone {
                gone = try db.query("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = \(dyingPid)")[0].decode(Bool.self, at: 0)
            }
            #expect(gone)
            #expect(try await store.runItemsRecoverDead(runId: run.id) == 3)
            let claimed = try db.query("SELECT claimed_by FROM churnwatch.run_items WHERE run_id = \(run.id) AND status = 'claimed'")
                .map { try $0.decode(String.self, at: 0) }
            #expect(claimed == ["alive", "alive", "alive"])

            // A claim of ours older than 10 s that is not in flight is an orphan; in-flight ones stay.
            try db.execute("UPDATE churnwatch.run_items SET lease_until = lease_until - interval '30 seconds' WHERE run_id = \(run.id) AND claimed_by = 'alive'")
            let keep = [a[0].originalTransactionId]
            #expect(try await store.runItemsReleaseOrphans(runId: run.id, worker: "alive", keep: keep, lease: 120, olderThan: 10) == 2)
            let still = try db.query("SELECT original_transaction_id FROM churnwatch.run_items WHERE run_id = \(run.id) AND status = 'claimed'")
                .map { try $0.decode(String.self, at: 0) }
            #expect(still == keep)
            _ = alive
            alive = nil
        }
    }

    @Test("runLockHeld sees the owner of a run kind")
    func runLock() async throws {
        try await FreshDatabase.with { fresh in
            try Self.seed(try fresh.connect())
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let owner = try fresh.connect()
            #expect(try owner.tryAdvisoryLock(store.runLockKey(.nightly)))
            #expect(try await store.runLockHeld(.nightly))
            #expect(try await store.runLockHeld(.backfill) == false)
            #expect(try owner.advisoryUnlock(store.runLockKey(.nightly)))
            #expect(try await store.runLockHeld(.nightly) == false)
        }
    }
}
