import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("Migrator")
struct MigratorTests {
    /// Every table other systems read (docs/contracts.md) plus the worker's own.
    static let contractTables = [
        "subscriptions", "transactions", "churn_events", "subscription_segments", "segment_daily",
        "winback_queue", "runs", "run_items", "quarantine", "schema_migrations",
    ]

    @Test("migrating an empty database creates every table; a second migrate changes nothing")
    func migrateTwice() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            let migrator = Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch")
            let first = try migrator.migrate(db)
            #expect(first == migrator.migrations.map(\.name))
            let tables = Set(try db.query("""
                SELECT table_name FROM information_schema.tables WHERE table_schema = 'churnwatch'
                """).map { try $0.decode(String.self, "table_name") })
            for table in Self.contractTables { #expect(tables.contains(table), "missing churnwatch.\(table)") }
            let before = try db.query("SELECT name, applied_at FROM churnwatch.schema_migrations ORDER BY name")
                .map { "\(try $0.decode(String.self, "name"))@\(try $0.decode(Date.self, "applied_at").timeIntervalSince1970)" }
            #expect(try migrator.migrate(db) == [])
            let after = try db.query("SELECT name, applied_at FROM churnwatch.schema_migrations ORDER BY name")
                .map { "\(try $0.decode(String.self, "name"))@\(try $0.decode(Date.self, "applied_at").timeIntervalSince1970)" }
            #expect(before == after)
            #expect(try migrator.status(db).allSatisfy { $0.state == .applied })
        }
    }

    @Test("upgrading to 0014 dates every existing win-back entry by its run's as-of, else its insert time")
    func upgradeDatesEntriesByTheirRun() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            let all = try ProjectMigrations.load()
            let before = all.filter { $0.name < "0014" }
            try Migrator(migrations: before, logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let asOf = Date(timeIntervalSince1970: 1_790_820_000)  // 2026-10-01 02:00 UTC, a backfilled night
            let run = try db.query("INSERT INTO churnwatch.runs (kind, as_of) VALUES ('nightly', \(asOf)) RETURNING id")[0].decode(Int64.self, "id")
            for (otid, runId) in [("1", Optional(run)), ("2", nil)] {
                try db.execute("""
                    INSERT INTO churnwatch.winback_queue (original_transaction_id, campaign, episode, reason, not_before, run_id)
                    VALUES (\(otid), 'save_offer', 'period:1', 'will_not_renew', now(), \(runId))
                    """)
            }
            try Migrator(migrations: all, logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let rows = try db.query("SELECT original_transaction_id, opened_at = coalesce(\(asOf), created_at) AS by_run, opened_at = created_at AS by_insert FROM churnwatch.winback_queue ORDER BY 1")
                .map { (try $0.decode(Bool.self, "by_run"), try $0.decode(Bool.self, "by_insert")) }
            #expect(rows.count == 2 && rows[0].0 && !rows[0].1 && rows[1].1, "\(rows)")
        }
    }

    @Test("a changed applied migration is refused, naming the file, before anything else is applied")
    func changedMigrationRefused() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            let original = try ProjectMigrations.load()
            try Migrator(migrations: original, logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            var edited = original
            edited[0].sql += "\n-- an edit\n"
            let next = Migration(name: "9999_later.sql", sql: "CREATE TABLE churnwatch.later (x int);")
            let migrator = Migrator(migrations: edited + [next], logger: .migrate, defaultBundleId: "com.example.churnwatch")
            do {
                try migrator.migrate(db)
                Issue.record("a changed migration must be refused")
            } catch let e as MigrationError {
                #expect(e.description.contains(original[0].name))
            }
            #expect(try db.query("SELECT to_regclass('churnwatch.later') IS NULL")[0].decode(Bool.self, at: 0))
            #expect(try migrator.status(db).first { $0.name == original[0].name }?.state == .changed)
            #expect(try migrator.status(db).first { $0.name == next.name }?.state == .pending)
        }
    }

    @Test("a failing migration rolls back entirely and is not recorded")
    func failingMigrationRollsBack() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            let broken = Migration(name: "0001_broken.sql", sql: "CREATE SCHEMA IF NOT EXISTS churnwatch; CREATE TABLE churnwatch.half (x int); SELECT no_such_function();")
            #expect(throws: PostgresError.self) { try Migrator(migrations: [broken], logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db) }
            #expect(try db.query("SELECT to_regclass('churnwatch.half') IS NULL")[0].decode(Bool.self, at: 0))
            #expect(try db.query("SELECT count(*) FROM churnwatch.schema_migrations")[0].decode(Int.self, at: 0) == 0)
        }
    }

    @Test("four migrators at once apply each migration exactly once")
    func concurrentMigrate() async throws {
        try await FreshDatabase.with { fresh in
            let migrations = try ProjectMigrations.load()
            let url = fresh.url
            let name = fresh.name
            let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        let db = try PostgresConnection(connectionString: url, overrides: ["dbname": name], logger: .postgres)
                        return try Migrator(migrations: migrations, logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
                    }
                }
                var all: [String] = []
                for try await names in group { all += names }
                return all
            }
            #expect(applied.sorted() == migrations.map(\.name).sorted())
        }
    }

    @Test("migration files must be named NNNN_name.sql")
    func fileNames() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mig-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "SELECT 1;".write(to: dir.appendingPathComponent("init.sql"), atomically: true, encoding: .utf8)
        #expect(throws: MigrationError.self) { try Migrator.load(directory: dir) }
        #expect(throws: MigrationError.self) { try Migrator.load(directory: dir.appendingPathComponent("missing")) }
    }
}
