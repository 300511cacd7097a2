import Foundation
import Polling
import Synchronization

/// The apps serve takes requests for: their feeds (notifications, by bundle id) and their cancel
/// pages (by app Apple id). A request naming an app serve does not know yet reads
/// `churnwatch.apps` again (at most once a second), so an app added with `churnwatch apps add`
/// is served without a restart.
public final class ServeApps: Sendable {
    public struct Loaded: Sendable {
        /// By bundle id (compared without case): each app's feed (which verifies as its sync
        /// does), or why its settings cannot be used.
        public var doors: [String: AppLookup<FeedSync>] = [:]
        public var appliers: [InboxApplier.App] = []
        /// By app Apple id: the apps that have one (and why its settings cannot be used).
        public var retention: [Int64: AppLookup<RetentionDoor>] = [:]
        public init() {}
    }

    private struct State {
        var loaded: Loaded
        var refreshedAt: ContinuousClock.Instant?
    }

    private let state: Mutex<State>
    private let load: @Sendable (_ known: Set<String>) async throws -> Loaded
    private let refreshEvery: Duration

    /// - Parameter load: the apps of the database not among `known` (lowercased bundle ids).
    public init(_ initial: Loaded, refreshEvery: Duration = .seconds(1),
                load: @escaping @Sendable (_ known: Set<String>) async throws -> Loaded) {
        var first = initial
        first.doors = Self.lowered(initial.doors)
        state = Mutex(State(loaded: first, refreshedAt: nil))
        (self.load, self.refreshEvery) = (load, refreshEvery)
    }

    static func lowered(_ doors: [String: AppLookup<FeedSync>]) -> [String: AppLookup<FeedSync>] {
        Dictionary(doors.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    /// The feeds the applier drains now.
    var appliers: [InboxApplier.App] { state.withLock { $0.loaded.appliers } }

    /// The app `bundleId` names; unknown when the database has no such app (read again first,
    /// unless it was read within `refreshEvery`).
    func door(_ bundleId: String) async -> AppLookup<FeedSync> {
        let key = bundleId.lowercased()
        return await find { $0.doors[key] } ?? .unknown
    }

    /// The cancel page of the app whose app Apple id is `appAppleId`.
    public func retention(_ appAppleId: Int64) async -> AppLookup<RetentionDoor> {
        await find { $0.retention[appAppleId] } ?? .unknown
    }

    private func find<T: Sendable>(_ pick: @Sendable (Loaded) -> T?) async -> T? {
        let (found, known, due) = state.withLock { s -> (T?, Set<String>, Bool) in
            let found = pick(s.loaded)
            let due = s.refreshedAt.map { ContinuousClock.now - $0 >= refreshEvery } ?? true
            if found == nil, due { s.refreshedAt = .now }
            return (found, Set(s.loaded.doors.keys), due)
        }
        if let found { return found }
        guard due, let added = try? await load(known) else { return nil }
        return state.withLock { s in
            for (name, door) in Self.lowered(added.doors) where s.loaded.doors[name] == nil { s.loaded.doors[name] = door }
            let names = Set(s.loaded.appliers.map { $0.store.app.lowercased() })
            s.loaded.appliers += added.appliers.filter { !names.contains($0.store.app.lowercased()) }
            for (id, door) in added.retention where s.loaded.retention[id] == nil { s.loaded.retention[id] = door }
            return pick(s.loaded)
        }
    }
}
