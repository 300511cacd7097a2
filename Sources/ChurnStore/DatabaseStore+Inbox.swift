import Foundation
import Postgres

/// What `churnwatch serve` keeps of the notifications Apple posts (docs/contracts.md "Serve").
extension DatabaseStore {
    /// Stores a verified notification in the inbox, durably (its own committed transaction),
    /// unless it is already known: recorded in `notifications` (from the history, a file or an
    /// earlier delivery already applied) or waiting in the inbox (by its UUID). Returns true
    /// when it was stored now, false when it was known (nothing changed).
    public func inboxReceive(_ signedPayload: String, uuid: UUID) async throws -> Bool {
        try await pool.withConnection { db in
            try db.execute("""
                INSERT INTO churnwatch.notification_inbox (signed_payload, notification_uuid)
                SELECT \(signedPayload), \(uuid)
                WHERE NOT EXISTS (SELECT 1 FROM churnwatch.notifications WHERE notification_uuid = \(uuid))
                ON CONFLICT (notification_uuid) WHERE notification_uuid IS NOT NULL DO NOTHING
                """) == 1
        }
    }

    /// The inbox rows not applied yet, and when the oldest of them was received (nil: none).
    public func inboxBacklog() async throws -> (pending: Int, oldest: Date?) {
        try await pool.withConnection { db in
            let row = try db.query("""
                SELECT count(*) AS n, min(received_at) AS oldest FROM churnwatch.notification_inbox WHERE processed_at IS NULL
                """)[0]
            return (try row.decode(Int.self, "n"), try row.decode(Date?.self, "oldest"))
        }
    }
}
