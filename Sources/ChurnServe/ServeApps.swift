import Foundation
import Synchronization

/// The apps serve takes notifications for, and their feeds. A notification naming an app serve
/// does not know yet reads `churnwatch.apps` again (at most once a second), so an app
/// added with `churnwatch apps add` is served without a restart.
public final class ServeApps: Sendable {
    public struct Loaded: Sendable {
        /// By bundle id (compared without case).
        public var doors: [String: NotificationReceiver.Door] = [:]
        public var appliers: [InboxApplier.App] = []
        public init() {}
    }

    private struct State {
        var doors: [String: NotificationReceiver.Door]
        var appliers: [InboxApplier.App]
        var refreshedAt: ContinuousClock.Instant?
    }

    private let state: Mutex<State>
    private let load: @Sendable (_ known: Set<String>) async throws -> Loaded
    private let refreshEvery: Duration

    /// - Parameter load: the apps of the database not among `known` (lowercased bundle ids).
    public init(_ initial: Loaded, refreshEvery: Duration = .seconds(1),
                load: @escaping @Sendable (_ known: Set<String>) async throws -> Loaded) {
        state = Mutex(State(doors: Self.lowered(initial.doors), appliers: initial.appliers, refreshedAt: nil))
        (self.load, self.refreshEvery) = (load, refreshEvery)
    }

    static func lowered(_ doors: [String: NotificationReceiver.Door]) -> [String: NotificationReceiver.Door] {
        Dictionary(doors.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
    }

    /// The feeds the applier drains now.
    var appliers: [InboxApplier.App] { state.withLock { $0.appliers } }

    /// The app `bundleId` names; nil when the database has no such app (read again first, unless
    /// it was read within `refreshEvery`).
    func door(_ bundleId: String) async -> NotificationReceiver.Door? {
        let key = bundleId.lowercased()
        let (found, known, due) = state.withLock { s -> (NotificationReceiver.Door?, Set<String>, Bool) in
            let due = s.refreshedAt.map { ContinuousClock.now - $0 >= refreshEvery } ?? true
            if s.doors[key] == nil, due { s.refreshedAt = .now }
            return (s.doors[key], Set(s.doors.keys), due)
        }
        if let found { return found }
        guard due, let added = try? await load(known) else { return nil }
        return state.withLock { s in
            for (name, door) in Self.lowered(added.doors) where s.doors[name] == nil { s.doors[name] = door }
            let names = Set(s.appliers.map { $0.store.app.lowercased() })
            s.appliers += added.appliers.filter { !names.contains($0.store.app.lowercased()) }
            return s.doors[key]
        }
    }
}
