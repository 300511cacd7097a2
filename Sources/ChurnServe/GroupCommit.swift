import Foundation
import Synchronization

/// Several requests' rows in one statement (group commit): what arrives while a statement is in
/// flight goes together in the next, so under load one commit and one round trip serve many
/// requests, and alone a request waits for nothing. Two ways in, one writer:
/// - ``submit(_:)``, commit before the answer (a notification: Apple is answered 200 only once
///   its row is durable): the caller waits for the statement that wrote its item, and gets its
///   error when that failed;
/// - ``enqueue(_:)``, answer before the commit (a cancel-page record: the answer never waits for
///   it): the item is written with those around it, and a failed batch goes back to the front
///   of the queue, tried again every `retryEvery`, until the database takes it.
///
/// At most `maxQueued` wait (a database that hangs holds the lanes: what waits is bounded); past
/// it ``submit(_:)`` throws ``Full`` and ``enqueue(_:)`` drops the item and says so.
final class GroupCommit<Item: Sendable, Answer: Sendable>: Sendable {
    typealias Waiter = CheckedContinuation<Result<Answer, any Error>, Never>

    private struct Entry {
        var item: Item
        /// Nil for an item enqueued without a caller waiting.
        var waiter: Waiter?
    }

    private struct State {
        var queued: [Entry] = []
        var writing = 0
        /// Those waiting for every queued item to be written (the stop).
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    struct Full: Error, CustomStringConvertible {
        var limit: Int
        var noun: String
        var description: String { "\(limit.formatted()) \(noun) are waiting for the database already" }
    }

    private let state = Mutex(State())
    private let lanes: Int
    private let maxQueued: Int
    private let batchSize: Int
    private let retryEvery: Duration
    private let noun: String
    private let write: @Sendable ([Item]) async throws -> [Answer]
    private let afterBatch: @Sendable (_ failed: Bool, _ pending: Int) -> Void

    /// - Parameters:
    ///   - lanes: statements in flight at once.
    ///   - noun: what an item is, for ``Full``'s line.
    ///   - write: writes a batch in one transaction; one answer per item, in order.
    ///   - afterBatch: told after each statement whether it failed and how many still wait.
    init(lanes: Int, maxQueued: Int, batchSize: Int = 500, retryEvery: Duration = .seconds(1), noun: String = "items",
         write: @escaping @Sendable ([Item]) async throws -> [Answer],
         afterBatch: @escaping @Sendable (_ failed: Bool, _ pending: Int) -> Void = { _, _ in }) {
        (self.lanes, self.maxQueued, self.batchSize, self.retryEvery) = (lanes, maxQueued, batchSize, retryEvery)
        (self.noun, self.write, self.afterBatch) = (noun, write, afterBatch)
    }

    /// Commit before the answer: returns the item's answer once the statement that wrote it
    /// committed; throws that statement's error, or ``Full``.
    func submit(_ item: Item) async throws -> Answer {
        let result = await withCheckedContinuation { (waiter: Waiter) in
            if !queue(Entry(item: item, waiter: waiter)) { waiter.resume(returning: .failure(Full(limit: maxQueued, noun: noun))) }
        }
        return try result.get()
    }

    /// Answer before the commit: queued, and written (again after a failure) until the database
    /// takes it. False when it was dropped: `maxQueued` wait already.
    @discardableResult
    func enqueue(_ item: Item) -> Bool {
        queue(Entry(item: item, waiter: nil))
    }

    /// Items waiting for a statement (not those being written).
    var waiting: Int { state.withLock { $0.queued.count } }

    /// Returns once nothing is queued or being written (the caller bounds the wait: with the
    /// database down it does not end).
    func idle() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.writing > 0 || !s.queued.isEmpty else { return true }
                s.idleWaiters.append(waiter)
                return false
            }
            if now { waiter.resume() }
        }
    }

    private func queue(_ entry: Entry) -> Bool {
        let (taken, start) = state.withLock { s -> (Bool, Bool) in
            guard s.queued.count < maxQueued else { return (false, false) }
            s.queued.append(entry)
            guard s.writing < lanes else { return (true, false) }
            s.writing += 1
            return (true, true)
        }
        if start { Task { await self.drain() } }
        return taken
    }

    /// One lane: writes what is queued, batch after batch, until nothing is.
    private func drain() async {
        while true {
            let (batch, idle) = state.withLock { s -> ([Entry], [CheckedContinuation<Void, Never>]) in
                let batch = Array(s.queued.prefix(batchSize))
                s.queued.removeFirst(batch.count)
                guard batch.isEmpty else { return (batch, []) }
                s.writing -= 1
                guard s.writing == 0 else { return ([], []) }
                defer { s.idleWaiters = [] }
                return ([], s.idleWaiters)
            }
            guard !batch.isEmpty else {
                for waiter in idle { waiter.resume() }
                return
            }
            do {
                let answers = try await write(batch.map(\.item))
                for (entry, answer) in zip(batch, answers) { entry.waiter?.resume(returning: .success(answer)) }
                afterBatch(false, state.withLock { $0.queued.count })
            } catch {
                // Callers waiting get the error; what was enqueued goes back to the front.
                for entry in batch { entry.waiter?.resume(returning: .failure(error)) }
                let kept = batch.filter { $0.waiter == nil }
                let pending = state.withLock { s -> Int in
                    s.queued.insert(contentsOf: kept, at: 0)
                    return s.queued.count
                }
                afterBatch(true, pending)
                if !kept.isEmpty { try? await Task.sleep(for: retryEvery) }
            }
        }
    }
}
