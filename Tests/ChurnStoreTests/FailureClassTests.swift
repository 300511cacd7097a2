import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// `run_items.failure_class`: migration 0010's conversion, and the readers that switch on it.
@Suite("ChurnStore run item failure classes")
struct FailureClassTests {
    static let reasons: [(String?, ItemFailureClass)] = [
        ("not found: 4040010 in every environment", .notFound), ("bad request: 4000006", .badRequest),
        ("verification: chain: untrusted root", .verification), ("malformed: no data", .malformed),
        ("rate limited: until 2026-11-21T02:00:00Z", .rateLimited), ("unavailable: HTTP 503", .unavailable),
        ("unauthorized: Apple rejected the API key", .unauthorized), ("untrusted server: https://x presented ...", .untrustedServer),
        ("internal: success treated as failure", .internal), ("something else: entirely", .unknown), (nil, .unknown),
    ]

    @Test("migration 0010 gives failed items the class of their reason's prefix, unknown for any other, none to the rest")
    func migrationConvertsExistingRows() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            let all = try ProjectMigrations.load()
            try Migrator(migrations: all.filter { $0.name < "0010" }, logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let run = try db.query("INSERT INTO churnwatch.runs (kind, as_of) VALUES ('nightly', now()) RETURNING id")[0].decode(Int64.self, at: 0)
            for (i, r) in Self.reasons.enumerated() {
                try db.execute("""
                    INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status, outcome)
                    VALUES (\(run), \(String(i)), 'new', 'failed', \(r.0))
                    """)
            }
            try db.execute("INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status, outcome) VALUES (\(run), 'done', 'new', 'done', 'ok')")
            try Migrator(migrations: all, logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            for (i, r) in Self.reasons.enumerated() {
                let stored = try db.query("SELECT failure_class FROM churnwatch.run_items WHERE original_transaction_id = \(String(i))")[0]
                    .decode(String?.self, at: 0)
                #expect(stored == r.1.rawValue, "\(r.0 ?? "NULL")")
            }
            #expect(try db.query("SELECT failure_class FROM churnwatch.run_items WHERE original_transaction_id = 'done'")[0].decode(String?.self, at: 0) == nil)
        }
    }

    @Test("resume retries exactly the run-wide classes; the 429 rounds exactly rate_limited; both clear the class")
    func resumeAndRetryRoundsSwitchOnTheClass() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let run = try db.query("INSERT INTO churnwatch.runs (kind, as_of) VALUES ('nightly', now()) RETURNING id")[0].decode(Int64.self, at: 0)
            for c in ItemFailureClass.allCases {
                // The reason's prose says nothing: only the class may decide.
                try db.execute("""
                    INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, status, outcome, failure_class)
                    VALUES (\(run), \(c.rawValue), 'new', 'failed', 'no prefix here', \(c.rawValue))
                    """)
            }
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            func pending() throws -> Set<String> {
                Set(try db.query("SELECT original_transaction_id FROM churnwatch.run_items WHERE status = 'pending' AND failure_class IS NULL AND outcome IS NULL")
                    .map { try $0.decode(String.self, at: 0) })
            }
            #expect(try await store.runItemsRateLimitedCount(run) == 1)
            #expect(try await store.runItemsRetryRateLimited(run) == 1)
            #expect(try pending() == ["rate_limited"])
            #expect(try await store.runItemsRecover(runId: run, silence: 60) == 3)
            #expect(try pending() == ["rate_limited", "unavailable", "unauthorized", "untrusted_server"])
            #expect(Set(ItemFailureClass.allCases.filter(\.retriedOnResume).map(\.rawValue)) == ["rate_limited", "unavailable", "unauthorized", "untrusted_server"])
        }
    }

    @Test("labels are the reason prefixes the summary, status and metrics always counted under")
    func labels() {
        #expect(ItemFailureClass.allCases.map(\.label) == ["not found", "bad request", "verification", "malformed", "rate limited",
                                                           "unavailable", "unauthorized", "untrusted server", "internal", "unknown"])
        for (reason, c) in Self.reasons where c != .unknown {
            #expect(reason?.hasPrefix(c.label + ": ") == true)
        }
    }
}
