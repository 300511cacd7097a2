import Foundation

/// A value guarded by a lock, for state that several tasks touch briefly and synchronously
/// (caches, token reuse). `Mutex` would do, but it needs macOS 15 and the package supports 14.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
