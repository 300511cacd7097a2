import CLibPQ
import Foundation

extension PostgresConnection {
    // MARK: Advisory locks

    /// Session-level lock; waits until granted.
    public func advisoryLock(_ key: Int64) throws {
        try execute("SELECT pg_advisory_lock(\(key))")
    }

    /// Session-level lock without waiting; true when granted.
    public func tryAdvisoryLock(_ key: Int64) throws -> Bool {
        try query("SELECT pg_try_advisory_lock(\(key))").first?.decode(Bool.self, at: 0) ?? false
    }

    /// Releases a session-level lock; false when it was not held.
    @discardableResult
    public func advisoryUnlock(_ key: Int64) throws -> Bool {
        try query("SELECT pg_advisory_unlock(\(key))").first?.decode(Bool.self, at: 0) ?? false
    }

    /// Transaction-level lock without waiting; true when granted.
    public func tryTransactionAdvisoryLock(_ key: Int64) throws -> Bool {
        try query("SELECT pg_try_advisory_xact_lock(\(key))").first?.decode(Bool.self, at: 0) ?? false
    }
}
