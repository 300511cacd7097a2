import Foundation
import Synchronization

/// The simulated clock: starts at a given moment and moves only when told (`advance`, `set`),
/// or, with a speed above 0, runs with the wall clock times that speed (then truncated to whole
/// seconds, so answers within a second share their signatures).
public final class SimClock: Sendable {
    private struct State {
        var base: Int64
        var wallBase: Int64
        var speed: Double
        /// The cancel page's hold: `now()` shows at most this (``setHold(_:)``).
        var hold: Int64 = .max
    }

    private let state: Mutex<State>

    public init(start: Int64, speed: Double = 0) {
        state = Mutex(State(base: start, wallBase: SimClock.wallNow(), speed: speed))
    }

    static func wallNow() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Simulated now, ms since 1970: what every answer, delivery and truth is as of. While the
    /// cancel page's views that the clock passed are being decided, the moment before the first
    /// of them (``CancelPageViewer``).
    public func now() -> Int64 {
        state.withLock { min(Self.unheld($0), $0.hold) }
    }

    /// Simulated now without the hold: where the clock was set or has run to.
    public func rawNow() -> Int64 {
        state.withLock { Self.unheld($0) }
    }

    private static func unheld(_ s: State) -> Int64 {
        guard s.speed > 0 else { return s.base }
        let t = s.base + Int64(Double(SimClock.wallNow() - s.wallBase) * s.speed)
        return t - t % 1000
    }

    /// `now()` shows at most `ms` until the hold is moved (`.max`: no hold).
    func setHold(_ ms: Int64) {
        state.withLock { $0.hold = ms }
    }

    /// Moves the clock by `ms` (may be negative), from where it was set or has run to.
    @discardableResult
    public func advance(by ms: Int64) -> Int64 {
        let current = rawNow()
        return set(current + ms)
    }

    /// Sets the clock to `ms`.
    @discardableResult
    public func set(_ ms: Int64) -> Int64 {
        state.withLock { s in
            s.base = ms
            s.wallBase = SimClock.wallNow()
        }
        return ms
    }
}
