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
    public init(
        connectionString: String,
        overrides: [String: String] = [:],
        size: Int = 4,
        logger: Logger = Logger(label: "churnwatch.postgres")
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
