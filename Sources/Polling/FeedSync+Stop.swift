import ChurnStore
import Foundation
import Synchronization

/// How a sync is stopped from outside (a signal, `--max-duration`, `--shutdown-grace`).
public struct FeedStopControl: Sendable {
    /// Asked before every page: a reason stops the sync there (what was read is committed with
    /// its cursor). The time budget is this closure's to apply.
    public var reason: @Sendable () -> String?
    /// Past this moment (the shutdown grace after the stop), the page in flight is abandoned:
    /// its request is cancelled and the cursor stays at the last commit. nil: no stop yet.
    public var abandonAt: @Sendable () -> Date?
    public var clock: any RunClock

    public init(reason: @escaping @Sendable () -> String?, abandonAt: @escaping @Sendable () -> Date?, clock: any RunClock) {
        self.reason = reason
        self.abandonAt = abandonAt
        self.clock = clock
    }
}

extension FeedSync {
    /// ``sync(now:runId:stop:)`` that obeys `control`: it stops between pages once asked, and a
    /// page still in flight when the grace is over is abandoned. Either way
    /// ``FeedSummary/stopped`` says why, and the next sync resumes from the stored cursor.
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
                if summary.stopped == nil, summary.failure != nil || Task.isCancelled, let reason = control.reason() {
                    summary.stopped = reason
                    summary.failure = nil
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
/// time budget counted from `startedAt`.
public final class FeedStopSwitch: Sendable {
    private let asked = Mutex<(reason: String, at: Date)?>(nil)
    private let startedAt: Date
    private let budget: TimeInterval?
    private let grace: TimeInterval
    private let clock: any RunClock

    public init(budget: TimeInterval?, grace: TimeInterval, clock: any RunClock = SystemRunClock()) {
        self.clock = clock
        self.startedAt = clock.now()
        self.budget = budget
        self.grace = grace
    }

    /// Asks the sync to stop (the first reason is kept).
    public func request(_ reason: String) {
        let now = clock.now()
        asked.withLock { if $0 == nil { $0 = (reason, now) } }
    }

    public var control: FeedStopControl {
        FeedStopControl(
            reason: { [self] in
                if let budget, clock.now() >= startedAt.addingTimeInterval(budget) { request("time budget (--max-duration) used up") }
                return asked.withLock { $0?.reason }
            },
            abandonAt: { [self] in asked.withLock { $0.map { $0.at.addingTimeInterval(grace) } } },
            clock: clock)
    }
}
