@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// What callers get instead of the pool: a run's advisory locks on a connection of their own,
/// riding out an outage, telling a lost database from other errors, and jsonb values.
@Suite("ChurnStore connection operations")
struct StoreConnectionTests {
    /// A store on a port nothing listens on (libpq's connect fails at once).
    static let unreachable = DatabaseStore(connectionString: "postgresql://postgres@127.0.0.1:1/x", connections: 1,
                                           logger: .store, databaseLogger: .postgres).scoped(to: AppRecord(bundleId: "com.example.churnwatch"))

    @Test("a run lock taken by one process's RunLocks is refused to another's until the first closes")
    func runLocksExclude() async throws {
        try await FreshDatabase.with { fresh in
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let key = store.runLockKey(.nightly)
            let first = store.runLocksOpen(logger: .store)
            let second = store.runLocksOpen(logger: .store)
            let taken = try await first.take(key, name: "nightly run")
            #expect(taken)
            #expect(first.holds(key))
            let refused = try await second.take(key, name: "nightly run")
            #expect(!refused)
            #expect(!second.holds(key))
            #expect(await first.keep(), "the lock connection is reachable")
            #expect(first.holds(key), "keep() on the same connection keeps the lock")
            await first.close()
            let takenAfterClose = try await second.take(key, name: "nightly run")
            #expect(takenAfterClose, "closing the lock connection released the lock")
            await second.close()
        }
    }

    @Test("an unreachable database is a connection problem of kind connectFailed; other errors are none")
    func connectionProblemClassifies() async throws {
        let error = await #expect(throws: (any Error).self) { try await Self.unreachable.database.schemaCheck() }
        let problem = try #require(error.flatMap { DatabaseConnectionProblem($0) })
        #expect(problem.kind == .connectFailed)
        #expect(!problem.message.isEmpty)
        #expect(DatabaseConnectionProblem(SchemaError(description: "behind")) == nil)
        #expect(DatabaseConnectionProblem(CancellationError()) == nil)
        #expect(DatabaseConnectionProblem(DatabaseConnectionProblem.lostError("not back yet"))
                == DatabaseConnectionProblem(kindLostWith: "not back yet"))
    }

    @Test("withReconnect retries a lost database within its budget, then gives up as lost; other errors at once")
    func withReconnectGivesUp() async throws {
        let retries = Counter()
        let policy = DatabaseRetryPolicy(initialDelay: 0.01, maxDelay: 0.02, budget: 0.2)
        let error = await #expect(throws: (any Error).self) {
            try await Self.unreachable.withReconnect(policy: policy, onRetry: { message, _ in retries.add(message) }) {
                try await Self.unreachable.database.schemaCheck()
            }
        }
        let problem = try #require(error.flatMap { DatabaseConnectionProblem($0) })
        #expect(problem.kind == .lost)
        #expect(problem.message.contains("gave up"), "\(problem.message)")
        #expect(retries.count >= 1, "each retried failure is told, with its message")

        let once = Counter()
        await #expect(throws: SchemaError.self) {
            try await Self.unreachable.withReconnect(policy: policy, onRetry: { message, _ in once.add(message) }) {
                throw SchemaError(description: "not a connection problem")
            }
        }
        #expect(once.count == 0)
    }

    @Test("StoredJSON encodes with sorted keys and reads back what it stored")
    func storedJSONRoundTrip() throws {
        let json = try StoredJSON(encoding: ["b": 1, "a": 2])
        #expect(json.text == #"{"a":2,"b":1}"#)
        #expect(try json.decode([String: Int].self) == ["a": 2, "b": 1])
        #expect(StoredJSON.emptyObject.text == "{}")
    }
}

extension DatabaseConnectionProblem {
    /// What ``lostError(_:)`` reads back as.
    init?(kindLostWith message: String) {
        self.init(PostgresError(kind: .connectionLost, message: message))
    }
}

/// Messages told to `onRetry`, from any thread.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []
    func add(_ message: String) { lock.withLock { messages.append(message) } }
    var count: Int { lock.withLock { messages.count } }
}
