import AppStoreServerAPI
import Synchronization

/// The notifications this process's receiver verified and is storing, for its own applier
/// (``Polling/FeedSync/verifiedBefore``): each is verified once in the process, not again when
/// its inbox row is applied. Only an optimization: a row another process stored, or one evicted
/// here, is verified by the drain as any other. Bounded (oldest out first).
public final class VerifiedCache: Sendable {
    private struct State {
        var entries: [String: VerifiedNotification] = [:]
        var order: [String] = []
        var head = 0
    }

    private let state = Mutex(State())
    private let capacity: Int

    public init(capacity: Int = 500) {
        self.capacity = capacity
    }

    public func put(_ signedPayload: String, _ verified: VerifiedNotification) {
        state.withLock { s in
            guard s.entries.updateValue(verified, forKey: signedPayload) == nil else { return }
            s.order.append(signedPayload)
            // The order keeps at most `capacity` keys, taken ones too (a key taken out of the
            // entries stays here until its turn: without this bound, every payload ever put).
            while s.order.count - s.head > capacity {
                s.entries[s.order[s.head]] = nil
                s.head += 1
            }
            if s.head > capacity {
                s.order.removeFirst(s.head)
                s.head = 0
            }
        }
    }

    /// The verified notification of `signedPayload`, removed; nil when not here.
    public func take(_ signedPayload: String) -> VerifiedNotification? {
        state.withLock { $0.entries.removeValue(forKey: signedPayload) }
    }

    public var count: Int { state.withLock { $0.entries.count } }
}
