import AppStoreServerAPI
import Foundation

/// Virtual time: `sleep(until:)` returns at once after moving the clock to the deadline, and
/// records how long it would have slept. Tests read ``sleeps`` instead of waiting.
final class TestClock: AppStoreClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date
    private var recorded: [TimeInterval] = []

    init(_ start: Date = Date(timeIntervalSince1970: 1_717_200_000)) { current = start }

    func now() -> Date { lock.withLock { current } }

    func sleep(until deadline: Date) async throws {
        try Task.checkCancellation()
        lock.withLock {
            recorded.append(max(0, deadline.timeIntervalSince(current)))
            if deadline > current { current = deadline }
        }
    }

    func advance(by seconds: TimeInterval) { lock.withLock { current = current.addingTimeInterval(seconds) } }

    /// Every requested sleep, in seconds, in order.
    var sleeps: [TimeInterval] { lock.withLock { recorded } }
    var totalSlept: TimeInterval { sleeps.reduce(0, +) }
}
