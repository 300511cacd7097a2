import AppStoreServerAPI
import Foundation
import Synchronization

/// The notifications this process's receiver verified and stored, for its own applier
/// (``Polling/FeedSync/verifiedBefore``), by `notificationUUID` (the inbox row's key): each is
/// verified once in the process, and its payload is not read back from the inbox. Only an
/// optimization: a row another process stored, or one not kept here, is read and verified by
/// the drain as any other.
///
/// Bounded, and when full it keeps what it has: the drain applies the oldest rows first, so
/// under a backlog the entries worth keeping are the oldest (evicting them for newer ones
/// would leave the drain nothing it can use). Entries older than `maxAge` go when it is full
/// (rows another serve process applied are never taken here).
public final class VerifiedCache: Sendable {
    private struct Entry {
        /// The app whose feed verified it (lowercased): only that app's drain takes it.
        var bundleId: String
        var verified: VerifiedNotification
        var at: ContinuousClock.Instant
    }

    private struct State {
        var entries: [UUID: Entry] = [:]
        /// When a full cache last dropped its old entries (at most once a second).
        var swept: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let maxAge: Duration

    /// - Parameters:
    ///   - capacity: entries kept at most (each a few KB: the decoded notification and its inner
    ///     JWS, which the applier verifies).
    ///   - maxAge: how old an entry may be before a full cache drops it.
    public init(capacity: Int = 500, maxAge: Duration = .seconds(60)) {
        (self.capacity, self.maxAge) = (capacity, maxAge)
    }

    /// Keeps `verified` for the applier of `bundleId`, unless the cache is full.
    public func put(_ uuid: UUID, bundleId: String, _ verified: VerifiedNotification) {
        let now = ContinuousClock.now
        let entry = Entry(bundleId: bundleId.lowercased(), verified: verified, at: now)
        state.withLock { s in
            if s.entries.count >= capacity, s.swept.map({ now - $0 > .seconds(1) }) ?? true {
                s.swept = now
                s.entries = s.entries.filter { now - $0.value.at < maxAge }
            }
            guard s.entries.count < capacity else { return }
            s.entries[uuid] = entry
        }
    }

    /// The verified notification stored as `uuid`, removed, when the app `bundleId` verified
    /// it; nil otherwise.
    public func take(_ uuid: UUID, bundleId: String) -> VerifiedNotification? {
        let app = bundleId.lowercased()
        return state.withLock { s in
            guard let e = s.entries[uuid], e.bundleId == app else { return nil }
            s.entries[uuid] = nil
            return e.verified
        }
    }

    /// Forgets `uuid`: its row was known already, or may not have been stored.
    public func remove(_ uuid: UUID) {
        _ = state.withLock { $0.entries.removeValue(forKey: uuid) }
    }

    public var count: Int { state.withLock { $0.entries.count } }
}
