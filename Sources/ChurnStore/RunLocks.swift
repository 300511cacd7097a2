import Foundation
import Logging
import Postgres
import Synchronization

/// The advisory locks one process holds while it works a run, on a connection of their own:
/// its worker lock (always) and the run lock of its kind (the owner). After that connection
/// was lost (a PostgreSQL restart, a terminated backend), `keep()` takes them again on a new one.
/// Opened with ``ChurnStore/runLocksOpen(logger:)``; the keys are ``ChurnStore/workerLockKey(_:)``
/// and ``ChurnStore/runLockKey(_:)``.
public final class RunLocks: Sendable {
    private let pool: PostgresPool
    private let logger: Logger
    /// The locks held (key → name) and the backend they are held on.
    private let state = Mutex<(held: [Int64: String], backend: Int32)>(([:], 0))

    init(store: ChurnStore, logger: Logger) {
        pool = PostgresPool(connectionString: store.pool.connectionString, overrides: store.pool.overrides, size: 1, logger: logger)
        self.logger = logger
    }

    /// Takes `key` without waiting; true when granted (and kept from then on).
    public func take(_ key: Int64, name: String) async throws -> Bool {
        let (got, pid) = try await pool.withConnection { c in (try c.tryAdvisoryLock(key), c.backendPID) }
        state.withLock {
            if got { $0.held[key] = name }
            $0.backend = pid
        }
        return got
    }

    /// Releases `key` if this process holds it (the change feed's lock, after its sync).
    public func release(_ key: Int64) async {
        guard state.withLock({ $0.held.removeValue(forKey: key) }) != nil else { return }
        _ = try? await pool.withConnection { c in try c.advisoryUnlock(key) }
    }

    /// Whether this process holds `key` (as far as it knows: ``keep()`` finds out after a restart).
    public func holds(_ key: Int64) -> Bool { state.withLock { $0.held[key] != nil } }

    /// Checks the lock connection; on a new connection, takes every lock again. False when the
    /// lock connection could not be reached (nothing is known then).
    @discardableResult
    public func keep() async -> Bool {
        let (wanted, known) = state.withLock { ($0.held, $0.backend) }
        do {
            let (pid, lost) = try await pool.withConnection { c -> (Int32, [Int64]) in
                try c.ping()
                guard c.backendPID != known else { return (c.backendPID, []) }
                var lost: [Int64] = []
                for key in wanted.keys where try !c.tryAdvisoryLock(key) { lost.append(key) }
                return (c.backendPID, lost)
            }
            guard pid != known else { return true }
            state.withLock {
                $0.backend = pid
                for key in lost { $0.held[key] = nil }
            }
            if lost.isEmpty {
                logger.notice("reconnected: took this process's locks again")
            } else {
                // Another process took the run while we were cut off. It works the same queue;
                // this one goes on as a helper (closing a run twice is harmless).
                logger.warning("reconnected, but another process holds the lock now: going on as a helper",
                               metadata: ["locks": "\(lost.compactMap { wanted[$0] }.joined(separator: ", "))"])
            }
            return true
        } catch {
            logger.debug("lock connection unavailable; trying again", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Releases every lock this process holds (at once, not when the server notices the
    /// closed connection) and closes the lock connection.
    public func close() async {
        let held = state.withLock { state -> [Int64] in
            defer { state.held = [:] }
            return Array(state.held.keys)
        }
        if !held.isEmpty {
            _ = try? await pool.withConnection { c in for key in held { _ = try c.advisoryUnlock(key) } }
        }
        await pool.close()
    }
}

extension ChurnStore {
    /// A connection of its own, to the same database, for the advisory locks a process holds
    /// while it works a run (``RunLocks``). `logger` gets its lines (reconnected, lost a lock).
    public func runLocksOpen(logger: Logger) -> RunLocks {
        RunLocks(store: self, logger: logger)
    }
}
