@testable import ChurnServe
import Foundation
import Synchronization
import Testing

/// The one group-commit writer behind the inbox (commit before the answer) and the cancel
/// page's records (answer before the commit, kept and retried while the database fails).
@Suite("group commit", .timeLimit(.minutes(1)))
struct GroupCommitTests {
    typealias Gate = ServeGroupTests.Gate
    struct Down: Error {}

    /// What the writer was asked to write, batch by batch; the first `holdFirst` batch waits
    /// for `gate`, the first `failures` batches throw.
    final class Database: Sendable {
        let batches = Mutex<[[Int]]>([])
        let failures: Mutex<Int>
        let gate = Gate()
        let holdFirst: Bool
        init(failures: Int = 0, holdFirst: Bool = false) {
            self.failures = Mutex(failures)
            self.holdFirst = holdFirst
        }
        func write(_ items: [Int]) async throws -> [Int] {
            let first = batches.withLock { b in
                b.append(items)
                return b.count == 1
            }
            if first, holdFirst { await gate.wait() }
            if failures.withLock({ f in
                defer { f = max(0, f - 1) }
                return f > 0
            }) { throw Down() }
            return items.map { $0 * 2 }
        }
        var started: Int { batches.withLock { $0.count } }
    }

    static func until(_ condition: () -> Bool) async throws {
        while !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test("commit before the answer: what arrives while a statement is in flight goes in the next one; each caller gets its own item's answer after its commit")
    func submitsGoTogether() async throws {
        let db = Database(holdFirst: true)
        let writer = GroupCommit<Int, Int>(lanes: 1, maxQueued: 100) { try await db.write($0) }
        let first = Task { try await writer.submit(1) }
        try await Self.until { db.started == 1 }
        let others = (2...10).map { n in Task { try await writer.submit(n) } }
        // The nine wait behind the held statement, then go in one.
        try await Self.until { writer.waiting == 9 }
        db.gate.open()
        #expect(try await first.value == 2)
        for (n, task) in zip(2...10, others) { #expect(try await task.value == n * 2) }
        #expect(db.batches.withLock { $0.map { $0.count } } == [1, 9])
    }

    @Test("commit before the answer, the statement failing: every caller of the batch gets the error, nothing is kept or written again")
    func submitFailureIsEachCallersError() async throws {
        let db = Database(failures: 1, holdFirst: true)
        let writer = GroupCommit<Int, Int>(lanes: 1, maxQueued: 100) { try await db.write($0) }
        let first = Task { try await writer.submit(1) }
        try await Self.until { db.started == 1 }
        db.gate.open()
        await #expect(throws: Down.self) { try await first.value }
        await writer.idle()
        #expect(db.started == 1, "the failed item was not written again")
        #expect(try await writer.submit(3) == 6)
    }

    @Test("answer before the commit: records the database refuses are kept and written again, in order, until it takes them; idle() returns once they are; past maxQueued the newest is dropped")
    func enqueuedRecordsSurviveFailures() async throws {
        let db = Database(failures: 3, holdFirst: true)
        let said = Mutex<[Bool]>([])
        let writer = GroupCommit<Int, Int>(lanes: 1, maxQueued: 5, retryEvery: .milliseconds(1)) { try await db.write($0) } afterBatch: { failed, _ in
            said.withLock { $0.append(failed) }
        }
        #expect(writer.enqueue(1))
        try await Self.until { db.started == 1 }
        for n in 2...6 { #expect(writer.enqueue(n)) }
        #expect(!writer.enqueue(7), "five wait already (the first is being written): the next is dropped")
        db.gate.open()
        await writer.idle()
        let batches = db.batches.withLock { $0 }
        // [1] fails, [1...6] fails twice, then [1...6] is written.
        let all = Array(1...6)
        #expect(batches == [[1], all, all, all], "\(batches)")
        #expect(said.withLock { $0 } == [true, true, true, false])
    }

    @Test("commit before the answer past maxQueued: Full, with a line that says how many wait")
    func fullIsRefusedAtOnce() async throws {
        let db = Database(holdFirst: true)
        let writer = GroupCommit<Int, Int>(lanes: 1, maxQueued: 2, noun: "notifications") { try await db.write($0) }
        let first = Task { try await writer.submit(1) }
        try await Self.until { db.started == 1 }
        let waiting = (2...3).map { n in Task { try await writer.submit(n) } }
        try await Self.until { writer.waiting == 2 }
        do {
            _ = try await writer.submit(4)
            Issue.record("a third waiting item was taken")
        } catch let full as GroupCommit<Int, Int>.Full {
            #expect(full.description == "2 notifications are waiting for the database already")
        }
        db.gate.open()
        #expect(try await first.value == 2)
        for task in waiting { _ = try await task.value }
    }
}
