import ChurnStore
import Foundation
import Logging
import Polling
import Synchronization

/// Wakes a waiter, or lets its next wait return at once (a signal is never lost).
final class Wakeup: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiter else {
                s.pending = true
                return nil
            }
            s.waiter = nil
            return w
        }
        waiter?.resume()
    }

    /// Returns on a signal, or after `timeout`.
    func wait(timeout: Duration) async {
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self.signal()
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.pending {
                    s.pending = false
                    return true
                }
                s.waiter = c
                return false
            }
            if now { c.resume() }
        }
        timer.cancel()
    }
}

/// `serve`'s background applier: applies the inbox through the feed's own code path (the same
/// verification, decisions and commit as a sync), app by app, as soon as a notification is
/// stored, and every `idle` for rows another serve process stored. Of several serve processes,
/// one applies an app's rows at a time (``ChurnStore/inboxLockKey``).
public final class InboxApplier: Sendable {
    public struct App: Sendable {
        public var store: ChurnStore
        public var feed: FeedSync
        public init(store: ChurnStore, feed: FeedSync) {
            (self.store, self.feed) = (store, feed)
        }
    }

    private let apps: ServeApps
    private let database: DatabaseStore
    private let metrics: ServeMetrics
    private let health: ServeHealth
    private let idle: Duration
    /// After a wake, how long the round waits for what else arrives (``run()``).
    private let linger: Duration
    private let logger: Logger
    private let pace: ApplierPace
    /// Requests in flight at the door (``ApplierPace``).
    private let doorInFlight: @Sendable () -> Int
    private let wakeup = Wakeup()
    private let stopping = Atomic<Bool>(false)

    public init(apps: ServeApps, database: DatabaseStore, metrics: ServeMetrics, health: ServeHealth, idle: Duration = .milliseconds(250),
                linger: Duration = .milliseconds(250), pace: ApplierPace = ApplierPace(),
                doorInFlight: @escaping @Sendable () -> Int = { 0 }, logger: Logger) {
        (self.apps, self.database, self.metrics, self.health, self.idle, self.logger) = (apps, database, metrics, health, idle, logger)
        self.linger = linger
        (self.pace, self.doorInFlight) = (pace, doorInFlight)
    }

    /// A notification was stored: apply it now.
    public func wake() { wakeup.signal() }

    /// Ends ``run()`` after the batch in progress (the rest stays in the inbox).
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        wakeup.signal()
    }

    /// Rounds until ``stop()``: a round drains every app's inbox rows; a failed round (the
    /// database down) is logged once per outage and retried after a second.
    public func run() async {
        // One lock connection per app, opened when the app is first applied.
        var locks: [String: RunLocks] = [:]
        var failing = false
        var counted = ContinuousClock.now - .seconds(1)
        while !stopping.load(ordering: .relaxed) {
            do {
                for app in apps.appliers where !stopping.load(ordering: .relaxed) {
                    let lock = locks[app.store.app] ?? app.store.runLocksOpen(logger: logger)
                    locks[app.store.app] = lock
                    try await round(app, lock)
                }
                // The backlog gauge at most once a second: at a steady stream a round is one
                // notification, and counting the inbox each time was most of its cost.
                if ContinuousClock.now - counted >= .seconds(1) {
                    let backlog = try await database.inboxBacklog()
                    metrics.backlog(pending: backlog.pending, lag: backlog.oldest.map { max(0, Date().timeIntervalSince($0)) } ?? 0)
                    counted = ContinuousClock.now
                }
                if failing { logger.notice("the applier is applying again") }
                failing = false
                health.applier(nil)
                await wakeup.wait(timeout: idle)
                // What arrives within `linger` of a wake goes in the same round: at a steady
                // stream a round's fixed cost (the lock, the page, the commit's statements) is
                // shared by the notifications of 250 ms instead of paid by each (6.9 ms of
                // serve's and PostgreSQL's CPU a notification at 100/s without it).
                if linger > .zero, !stopping.load(ordering: .relaxed) { try? await Task.sleep(for: linger) }
            } catch {
                metrics.applierError()
                health.applier("\(error)")
                if !failing { logger.error("the applier cannot apply the inbox (retried every second)", metadata: ["error": "\(error)"]) }
                failing = true
                await wakeup.wait(timeout: .seconds(1))
            }
        }
        for l in locks.values { await l.close() }
    }

    /// What the drain awaits after each full batch: while the door is busy, a pause of at most
    /// what ``ApplierPace`` allows for the batch just applied; false once ``stop()`` was called
    /// (the drain ends there, and the rest waits in the inbox for the next process).
    private func giveWay() -> @Sendable () async -> Bool {
        let last = Mutex(ContinuousClock.now)
        return { [self] in
            let clock = ContinuousClock()
            let batchEnd = clock.now
            let batch = batchEnd - last.withLock { $0 }
            while !stopping.load(ordering: .relaxed) {
                let rest = pace.giveWay(inFlight: doorInFlight(), batch: batch, waited: clock.now - batchEnd)
                guard rest > .zero else { break }
                try? await Task.sleep(for: min(rest, .milliseconds(5)))
            }
            last.withLock { $0 = clock.now }
            return !stopping.load(ordering: .relaxed)
        }
    }

    /// One app's pending rows, if no other serve process is applying them.
    private func round(_ app: App, _ locks: RunLocks) async throws {
        guard try await locks.take(app.store.inboxLockKey, name: "inbox") else { return }
        do {
            let s = try await app.feed.drainInbox(now: Date(), between: giveWay())
            await locks.release(app.store.inboxLockKey)
            guard s.read > 0 else { return }
            metrics.applied(app: app.store.app, outcomes: ["applied": s.applied, "duplicate": s.duplicates, "stale": s.stale,
                                                          "quarantined": s.quarantined, "ignored": s.ignored], events: s.events)
        } catch {
            await locks.release(app.store.inboxLockKey)
            throw error
        }
    }
}
