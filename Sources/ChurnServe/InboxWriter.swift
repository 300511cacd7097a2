import ChurnStore
import Foundation
import Synchronization

/// Stores what the receiver verified, several requests to one statement: requests that arrive
/// while a write is in flight go together in the next (group commit), so under load a commit
/// and a round trip serve many notifications, and alone a notification waits for nothing.
/// Each caller is answered after the statement that stored it committed.
public final class InboxWriter: Sendable {
    typealias Waiter = CheckedContinuation<Result<Bool, any Error>, Never>

    private struct State {
        var queued: [(payload: String, uuid: UUID, app: String, waiter: Waiter)] = []
        var writing = 0
    }

    private let database: DatabaseStore
    private let state = Mutex(State())
    /// Statements in flight at once.
    private let lanes: Int
    /// Notifications waiting for a statement, at most.
    private let maxQueued = 2_000

    struct QueueFull: Error, CustomStringConvertible {
        var description: String { "2,000 notifications are waiting for the database already" }
    }

    public init(database: DatabaseStore, lanes: Int = 2) {
        (self.database, self.lanes) = (database, lanes)
    }

    /// Stores one notification of `app` (the bundle id that verified it): true when stored now,
    /// false when it was known already.
    public func store(_ signedPayload: String, uuid: UUID, app: String) async throws -> Bool {
        let result = await withCheckedContinuation { (waiter: Waiter) in
            let (start, full) = state.withLock { s -> (Bool, Bool) in
                // A database that hangs holds the lanes: what waits is bounded (its callers
                // were answered 503 at their budget; Apple delivers again).
                guard s.queued.count < maxQueued else { return (false, true) }
                s.queued.append((signedPayload, uuid, app, waiter))
                guard s.writing < lanes else { return (false, false) }
                s.writing += 1
                return (true, false)
            }
            if full { waiter.resume(returning: .failure(QueueFull())) }
            if start { Task { await self.write() } }
        }
        return try result.get()
    }

    /// Writes what is queued, batch after batch, until nothing is.
    private func write() async {
        while true {
            let batch = state.withLock { s -> [(payload: String, uuid: UUID, app: String, waiter: Waiter)] in
                let batch = Array(s.queued.prefix(500))
                s.queued.removeFirst(batch.count)
                if batch.isEmpty { s.writing -= 1 }
                return batch
            }
            guard !batch.isEmpty else { return }
            do {
                let stored = try await database.inboxReceive(batch.map { ($0.payload, $0.uuid, $0.app) })
                for b in batch { b.waiter.resume(returning: .success(stored.contains(b.uuid))) }
            } catch {
                for b in batch { b.waiter.resume(returning: .failure(error)) }
            }
        }
    }
}
