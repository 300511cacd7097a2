import Foundation

/// The time the run engine works by: the only place it reads the time or sleeps. The rules
/// (``RunMachine``) get the time as values from here; tests can drive their own clock.
public protocol RunClock: Sendable {
    /// The time now.
    func now() -> Date
    /// Returns at `deadline` (at once when it has passed); throws when the task is cancelled.
    func sleep(until deadline: Date) async throws
}

/// The system's clock (production).
public struct SystemRunClock: RunClock {
    public init() {}

    public func now() -> Date { Date() }

    public func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSince(Date())
        if seconds > 0 { try await Task.sleep(for: .seconds(seconds)) }
        try Task.checkCancellation()
    }
}
