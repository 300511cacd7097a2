import ChurnModel
import ChurnStore
import Foundation
import Synchronization

/// How a sync is stopped from outside (a signal, `--max-duration`, `--shutdown-grace`).
public struct FeedStopControl: Sendable {
    /// Asked before every page: a stop ends the sync there (what was read is committed with
    /// its cursor). The time budget is this closure's to apply.
    public var reason: @Sendable () -> RunStop?
    /// Past this moment (the shutdown grace after the stop), the page in flight is abandoned:
    /// its request is cancelled and the cursor stays at the last commit. nil: no stop yet.
    public var abandonAt: @Sendable () -> Date?
    public var clock: any RunClock

    public init(reason: @escaping @Sendable () -> RunStop?, abandonAt: @escaping @Sendable () -> Date?, clock: any RunClock) {
        self.reason = reason
        self.abandonAt = abandonAt
        self.clock = clock
    }
}

extension FeedSync {
    /// ``sync(now:runId:stop:)`` that obeys `control`: it stops between pages once asked, and a
    /// page still in flight when the grace is over is abandoned. Either way
    /// ``FeedSummary/stop`` says why, and the next sync resumes from the stored cursor.
    public func sync(now: Date, runId: Int64? = nil, control: FeedStopControl) async throws -> FeedSummary {
        try await withThrowingTaskGroup(of: FeedSummary?.self) { group in
            group.addTask {
                var summary: FeedSummary
                do {
                    summary = try await self.sync(now: now, runId: runId, stop: control.reason)
                } catch is CancellationError {
                    summary = FeedSummary()
                }
                // A page cancelled at the grace's end reads as a failed call: it was a stop.
                if summary.stop?.isAskedFor != true, summary.stop != nil || Task.isCancelled, let asked = control.reason() {
                    summary.stop = asked
                }
                return summary
            }
            group.addTask {
                // Watches the grace: returns (nil) when it is over, so the sync is cancelled.
                while true {
                    let now = control.clock.now()
                    let at = control.abandonAt()
                    if let at, now >= at { return nil }
                    try await control.clock.sleep(until: min(at ?? .distantFuture, now.addingTimeInterval(0.25)))
                }
            }
            while let result = try await group.next() {
                guard let summary = result else {
                    group.cancelAll()
                    continue
                }
                group.cancelAll()
                return summary
            }
            return FeedSummary()
        }
    }
}

/// A stop asked from outside a sync that runs alone (`notifications sync`): a signal, or the
/// time budget (``StopBudget``) counted from its start.
public final class FeedStopSwitch: Sendable {
    private let asked = Mutex<(stop: RunStop, at: Date)?>(nil)
    private let budget: StopBudget
    private let clock: any RunClock

    public init(budget: TimeInterval?, grace: TimeInterval, clock: any RunClock = SystemRunClock()) {
        self.clock = clock
        self.budget = StopBudget(startedAt: clock.now(), maxDuration: budget, grace: grace)
    }

    /// Asks the sync to stop (the first stop is kept).
    public func request(_ stop: RunStop) {
        let now = clock.now()
        asked.withLock { if $0 == nil { $0 = (stop, now) } }
    }

    public var control: FeedStopControl {
        FeedStopControl(
            reason: { [self] in
                if budget.usedUp(at: clock.now()) { request(.timeBudget) }
                return asked.withLock { $0?.stop }
            },
            abandonAt: { [self] in asked.withLock { $0.map { budget.abandonAt(stoppedAt: $0.at) } } },
            clock: clock)
    }
}
