@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// The inbox is per app in SQL (migration 0024): each row names the app whose feed applies it.
@Suite("the inbox per app")
struct InboxPerAppTests {
    /// A JWS-shaped string whose payload is `json` (the signature is not read here).
    static func jws(_ json: String) -> String {
        let payload = Data(json.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJFUzI1NiJ9.\(payload).c2ln"
    }

    @Test("a row inserted without an app goes to the app its payload names (without case), else the default app; serve's rows keep the app that verified them; each store pages and counts only its own")
    func rowsGoToTheirApp() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            try db.execute("INSERT INTO churnwatch.apps (bundle_id) VALUES ('com.example.Second')")
            let inserted: [(String, String)] = [
                (Self.jws(#"{"notificationType":"DID_RENEW","data":{"bundleId":"com.example.second"}}"#), "com.example.Second"),
                (Self.jws(#"{"notificationType":"TEST","summary":{"bundleId":"com.example.churnwatch"}}"#), "com.example.churnwatch"),
                (Self.jws(#"{"data":{"bundleId":"com.example.unknown"}}"#), "com.example.churnwatch"),
                ("not a jws at all", "com.example.churnwatch"),
                (Self.jws("[1, 2"), "com.example.churnwatch"),
            ]
            for (payload, _) in inserted { try db.execute("INSERT INTO churnwatch.notification_inbox (signed_payload) VALUES (\(payload))") }
            let owners = try db.query("SELECT bundle_id FROM churnwatch.notification_inbox ORDER BY id").map { try $0.decode(String.self, at: 0) }
            #expect(owners == inserted.map(\.1))

            let database = DatabaseStore(pool: fresh.pool(size: 2), logger: .store)
            let uuid = UUID()
            // Serve names the app that verified the row, whatever the payload claims.
            #expect(try await database.inboxReceive([(Self.jws(#"{"data":{"bundleId":"com.example.churnwatch"}}"#), uuid, "com.example.Second")]) == [uuid])
            let first = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let second = ChurnStore(pool: fresh.pool(size: 1), logger: .store, app: "com.example.Second")
            #expect(try await first.notificationInboxPending(limit: 10).count == 4)
            let theirs = try await second.notificationInboxPending(limit: 10)
            #expect(theirs.count == 2 && theirs.last?.notificationUUID == uuid)
            #expect(try await second.feedStatus(environment: .production, asOf: Date()).inboxPending == 2)
            #expect(try await database.inboxBacklog().pending == 6)
        }
    }
}
