import ChurnInput
@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore.subscriptionsImport")
struct SubscriptionsImportTests {
    @Test("imports new rows, is idempotent, keeps existing rows unchanged, counts duplicates and rejects")
    func importTwice() async throws {
        try await FreshDatabase.with { fresh in
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(try fresh.connect())
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            var csv = "original_transaction_id,app_account_token,customer_ref,environment,receipt_data\n"
            for i in 0..<5000 {
                csv += "\(4_000_000 + i),\(UUID()),\"cust,\(i)\",\(i % 10 == 0 ? "Sandbox" : "Production"),\(i % 7 == 0 ? "UkVDRUlQVA==" : "")\n"
            }
            csv += "4000001,,dup,Production,\n"   // duplicate of an earlier line
            csv += "bad id,,x,Production,\n"        // rejected
            let parser = try SubscriptionImportParser(data: Data(csv.utf8))
            let first = try await store.subscriptionsImport(try ImportSpool(parser))
            #expect(first.read == 5001)
            #expect(first.inserted == 5000)
            #expect(first.duplicatesInFile == 1)
            #expect(first.rejectedCount == 1)
            #expect(first.rejections.first?.line == 5003)

            let db = try fresh.connect()
            let row = try db.query("SELECT customer_ref, environment, receipt_data FROM churnwatch.subscriptions WHERE original_transaction_id = '4000001'")[0]
            #expect(try row.decode(String.self, "customer_ref") == "cust,1", "the first line for an id wins")
            #expect(try db.query("SELECT count(*) FROM churnwatch.subscriptions WHERE environment = 'Sandbox'")[0].decode(Int.self, at: 0) == 500)
            #expect(try db.query("SELECT count(*) FROM churnwatch.subscriptions WHERE receipt_data IS NOT NULL")[0].decode(Int.self, at: 0) == 715)

            // The worker has polled one subscription; a re-import must not touch it.
            try db.execute("UPDATE churnwatch.subscriptions SET customer_ref = 'changed', last_polled_at = now() WHERE original_transaction_id = '4000002'")
            let second = try await store.subscriptionsImport(try ImportSpool(parser))
            #expect(second.inserted == 0)
            #expect(second.alreadyKnown == 5000)
            #expect(try db.query("SELECT customer_ref FROM churnwatch.subscriptions WHERE original_transaction_id = '4000002'")[0].decode(String.self, at: 0) == "changed")
            #expect(try db.query("SELECT count(*) FROM churnwatch.subscriptions")[0].decode(Int.self, at: 0) == 5000)
        }
    }
}
