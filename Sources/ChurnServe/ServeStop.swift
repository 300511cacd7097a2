import Foundation

/// The stop of `churnwatch serve` after SIGTERM/SIGINT, bounded as a whole by one grace
/// (`--shutdown-grace`): the applier stops after its batch in progress (the rows after it stay
/// in the inbox, durable, for the next process), the door answers what is in flight, and the
/// cancel page's records are flushed, all by the same deadline.
public enum ServeStop {
    public struct Outcome: Sendable, Equatable {
        /// Every request in flight was answered.
        public var idle: Bool
        /// The applier's batch in progress ended (else its transaction is rolled back at exit,
        /// and its rows are applied by the next process).
        public var applierStopped: Bool
        /// Every cancel-page answer was recorded.
        public var recorded: Bool
    }

    public static func run(door: HTTPDoor, applier: InboxApplier, applying: Task<Void, Never>, retention: RetentionAnswerer,
                           grace: Duration) async -> Outcome {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: grace)
        applier.stop()
        let idle = await door.drain(grace: grace)
        let stopped = await within(max(.zero, deadline - clock.now)) { await applying.value } != nil
        let recorded = await retention.flush(within: max(.zero, deadline - clock.now))
        return Outcome(idle: idle, applierStopped: stopped, recorded: recorded)
    }
}
