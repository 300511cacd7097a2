import Dispatch
import Foundation
import Logging

/// A small pool of libpq connections for Swift concurrency.
///
/// Each connection lives on its own serial dispatch queue, and the closures given to
/// `withConnection` run there, so libpq's blocking calls never occupy Swift's cooperative
/// threads and a connection serves one task at a time. Connections are opened lazily; one that
/// broke (server restart, terminated backend) is dropped and replaced on next use.
public final class PostgresPool: Sendable {
    private let slots: [Slot]
    private let manager: SlotManager
    /// Where the pool connects (for opening a dedicated connection to the same database).
    public let connectionString: String
    public let overrides: [String: String]
    private let logger: Logger

    /// - Parameters:
    ///   - connectionString: libpq connection string or `postgresql://` URL.
    ///   - size: the most connections open at once.
    ///   - overrides: libpq keywords applied on top of the connection string.
    ///   - logger: the caller's (a dropped connection, a retried transaction).
    public init(
        connectionString: String,
        overrides: [String: String] = [:],
        size: Int = 4,
        logger: Logger
    ) {
        precondition(size > 0, "pool size must be positive")
        self.connectionString = connectionString
        self.overrides = overrides
        self.logger = logger
        slots = (0..<size).map { Slot(index: $0) }
        manager = SlotManager(count: size)
    }

    /// The most connections this pool opens.
    public var size: Int { slots.count }

    /// Runs `body` with a connection of the pool, off the cooperative thread pool.
    @discardableResult
    public func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        let index = await manager.acquire()
        let slot = slots[index]
        let connectionString = self.connectionString
        let overrides = self.overrides
        let logger = self.logger
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            slot.queue.async {
                continuation.resume(returning: Result {
                    try slot.run(connectionString: connectionString, overrides: overrides, logger: logger, body)
                })
            }
        }
        await manager.release(index)
        return try result.get()
    }

    /// Runs `body` in a transaction, retrying the whole transaction (up to `maxAttempts`)
    /// when it fails for a retryable reason: serialization failure, deadlock, or a lost
    /// connection (which is replaced). `body` must be safe to run again.
    @discardableResult
    public func withTransaction<T: Sendable>(
        maxAttempts: Int = 3,
        _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await withConnection { connection in
                    try connection.transaction(body)
                }
            } catch let error as PostgresError where error.isRetryable && attempt < maxAttempts {
                logger.debug("retrying transaction", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                attempt += 1
                try await Task.sleep(nanoseconds: UInt64(attempt) * 20_000_000)
            }
        }
    }

    /// Runs `operation` (which uses this pool or any other) and, while it fails because
    /// PostgreSQL went away (a dropped connection, a restart, a server that does not answer
    /// yet), runs it again after a capped exponential backoff, for at most `policy.budget`
    /// seconds after the first such failure. Any other error is thrown at once. `operation`
    /// must be safe to run again: after a lost connection it may or may not have committed.
    ///
    /// - Parameter onRetry: told about each failure that will be retried, with the wait before
    ///   the next attempt (for a log line).
    /// - Throws: the operation's error; when the budget is used up, a `.connectionLost` error
    ///   saying for how long PostgreSQL was unreachable; `CancellationError` when the task is
    ///   cancelled while waiting.
    public func withReconnect<T: Sendable>(
        policy: PostgresReconnectPolicy = PostgresReconnectPolicy(),
        onRetry: (@Sendable (PostgresError, TimeInterval) -> Void)? = nil,
        _ operation: @Sendable () async throws -> T
    ) async throws -> T {
        var firstFailure: Date?
        var attempt = 0
        while true {
            do {
                return try await operation()
            } catch let error as PostgresError where error.isConnectionProblem {
                let now = Date()
                let since = firstFailure ?? now
                firstFailure = since
                attempt += 1
                let delay = policy.delay(afterAttempt: attempt)
                if now.addingTimeInterval(delay).timeIntervalSince(since) > policy.budget {
                    throw PostgresError(kind: .connectionLost,
                                        message: "PostgreSQL unreachable for \(Int(now.timeIntervalSince(since)))s, gave up: \(error.message)",
                                        statement: error.statement)
                }
                onRetry?(error, delay)
                try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
            }
        }
    }

    /// Closes every idle connection. In-flight closures finish first on their queues.
    public func close() async {
        for slot in slots {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                slot.queue.async {
                    slot.connection = nil
                    c.resume()
                }
            }
        }
    }
}

/// One connection's home: a serial queue and the connection confined to it.
private final class Slot: @unchecked Sendable {
    let queue: DispatchQueue
    /// Touched only on `queue`.
    var connection: PostgresConnection?

    init(index: Int) {
        queue = DispatchQueue(label: "churnwatch.postgres.connection.\(index)")
    }

    func run<T>(connectionString: String, overrides: [String: String], logger: Logger, _ body: (PostgresConnection) throws -> T) throws -> T {
        let c: PostgresConnection
        if let existing = connection, !existing.isBroken {
            c = existing
        } else {
            connection = nil
            c = try PostgresConnection(connectionString: connectionString, overrides: overrides, logger: logger)
            connection = c
        }
        do {
            let value = try body(c)
            if c.isBroken { connection = nil }
            return value
        } catch {
            if c.isBroken {
                logger.warning("dropping a broken PostgreSQL connection", metadata: ["error": "\(error)"])
                connection = nil
            }
            throw error
        }
    }
}

/// Hands out slot indices; waiters are served first come, first served.
private actor SlotManager {
    private var free: [Int]
    private var waiters: [CheckedContinuation<Int, Never>] = []
    private var head = 0

    init(count: Int) { free = Array((0..<count).reversed()) }

    func acquire() async -> Int {
        if let index = free.popLast() { return index }
        return await withCheckedContinuation { waiters.append($0) }
    }

    func release(_ index: Int) {
        if head < waiters.count {
            let waiter = waiters[head]
            head += 1
            if head > 64 && head * 2 > waiters.count {
                waiters.removeFirst(head)
                head = 0
            }
            waiter.resume(returning: index)
        } else {
            free.append(index)
        }
    }
}

/// How long and how often `PostgresPool.withReconnect` tries again while PostgreSQL is away.
public struct PostgresReconnectPolicy: Sendable, Equatable {
    /// Seconds before the second attempt; doubled for each further one.
    public var initialDelay: TimeInterval
    /// The longest wait between two attempts, in seconds.
    public var maxDelay: TimeInterval
    /// Seconds after the first failure after which no further attempt starts.
    public var budget: TimeInterval

    public init(initialDelay: TimeInterval = 0.1, maxDelay: TimeInterval = 5, budget: TimeInterval = 120) {
        self.initialDelay = max(0.001, initialDelay)
        self.maxDelay = max(self.initialDelay, maxDelay)
        self.budget = max(0, budget)
    }

    /// The wait after failed attempt `attempt` (1-based): `initialDelay · 2^(attempt-1)`, capped.
    public func delay(afterAttempt attempt: Int) -> TimeInterval {
        min(maxDelay, initialDelay * pow(2, Double(min(max(0, attempt - 1), 30))))
    }
}

extension PostgresError {
    /// The server is unreachable or the connection broke: worth trying again later, on a new
    /// connection. (Errors the server reports on a working connection are not.)
    public var isConnectionProblem: Bool {
        kind == .connectionLost || kind == .connectionFailed
    }
}
