import Foundation
import Postgres

/// What `churnwatch serve` keeps of the notifications Apple posts (docs/contracts.md "Serve").
extension DatabaseStore {
    /// Stores verified notifications in the inbox, durably (one committed statement), except
    /// those already known: recorded in `notifications` (from the history, a file or an earlier
    /// delivery already applied) or waiting in the inbox (by UUID). Returns the UUIDs stored now;
    /// the others were known (nothing changed for them). Each row is `bundleId`'s, the app
    /// whose keys verified it (its feed applies it).
    public func inboxReceive(_ notifications: [(signedPayload: String, uuid: UUID, bundleId: String)]) async throws -> Set<UUID> {
        guard !notifications.isEmpty else { return [] }
        return try await pool.withConnection { db in
            Set(try db.query("""
                INSERT INTO churnwatch.notification_inbox (signed_payload, notification_uuid, bundle_id)
                SELECT x.p, x.u, x.b
                FROM unnest(\(notifications.map(\.signedPayload))::text[], \(notifications.map(\.uuid))::uuid[],
                            \(notifications.map(\.bundleId))::text[]) AS x(p, u, b)
                WHERE NOT EXISTS (SELECT 1 FROM churnwatch.notifications n WHERE n.notification_uuid = x.u)
                ON CONFLICT (notification_uuid) WHERE notification_uuid IS NOT NULL DO NOTHING
                RETURNING notification_uuid
                """).map { try $0.decode(UUID.self, at: 0) })
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
