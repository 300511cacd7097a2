import ChurnStore
import Foundation

/// Stores what the receiver verified, commit before the answer (``GroupCommit/submit(_:)``):
/// requests that arrive while a statement is in flight go together in the next, and each caller
/// is answered after the statement that stored it committed.
public final class InboxWriter: Sendable {
    private struct Row {
        var payload: String
        var uuid: UUID
        var app: String
    }

    private let writer: GroupCommit<Row, Bool>

    /// - Parameter lanes: statements in flight at once; at most 2,000 notifications wait.
    public init(database: DatabaseStore, lanes: Int = 2) {
        writer = GroupCommit(lanes: lanes, maxQueued: 2_000, noun: "notifications") { rows in
            let stored = try await database.inboxReceive(rows.map { ($0.payload, $0.uuid, $0.app) })
            return rows.map { stored.contains($0.uuid) }
        }
    }

    /// Stores one notification of `app` (the bundle id that verified it): true when stored now,
    /// false when it was known already.
    public func store(_ signedPayload: String, uuid: UUID, app: String) async throws -> Bool {
        try await writer.submit(Row(payload: signedPayload, uuid: uuid, app: app))
    }
}
