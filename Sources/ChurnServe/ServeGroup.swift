import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// `churnwatch serve`'s long-running parts as one `ServiceGroup` (swift-service-lifecycle): the
/// cancel page's recorder, the inbox applier, the webhook sender and the HTTP door, started in that order and
/// stopped in the reverse one on SIGTERM/SIGINT (or ``ServiceGroup/triggerGracefulShutdown()``):
/// the door stops accepting and answers what is in flight, then the sender ends its attempts in
/// flight, then the applier ends after its batch
/// in progress (the rest stays in the inbox, durable, for the next process), then the recorder
/// writes what it holds. `grace` bounds the whole stop (the group's
/// `maximumGracefulShutdownDuration`): past it every part is cancelled, stops waiting, and says
/// what it left in ``ServeGroup/Outcome``.
public final class ServeGroup: Sendable {
    /// What the stop left behind; the CLI's exit status and log lines read it.
    public struct Outcome: Sendable, Equatable {
        /// Every request in flight was answered.
        public var idle = false
        /// The applier's batch in progress ended (else its transaction is rolled back at exit,
        /// and its rows are applied by the next process).
        public var applierStopped = false
        /// Every cancel-page answer was recorded.
        public var recorded = false
        /// The webhook sender's attempts in flight ended and were written (true without one).
        public var webhooksStopped = true
    }

    /// What each part says as it stops, written by the parts.
    final class Said: Sendable {
        let outcome = Mutex(Outcome())
        func set(_ change: (inout Outcome) -> Void) { outcome.withLock { change(&$0) } }
    }

    public let group: ServiceGroup
    private let said = Said()

    /// - Parameters:
    ///   - door: bound already (its port is known, and a port taken is the caller's error).
    ///   - signals: the stop signals (none in a test, which calls `triggerGracefulShutdown()`).
    ///   - ready: called once the signals are trapped and every part runs.
    public init(door: HTTPDoor, applier: InboxApplier, retention: RetentionAnswerer, webhooks: WebhookSender? = nil, grace: Duration,
                signals: [UnixSignal] = [.sigterm, .sigint], logger: Logger,
                ready: @escaping @Sendable () -> Void = {}, stopping: @escaping @Sendable () -> Void = {}) {
        let outcome = said
        var services: [any Service] = [
            RecorderService(retention: retention, outcome: outcome),
            ApplierService(applier: applier, outcome: outcome),
        ]
        if let webhooks { services.append(WebhookService(sender: webhooks, outcome: outcome)) }
        services.append(DoorService(door: door, outcome: outcome, ready: ready, stopping: stopping))
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: signals, cancellationSignals: [], logger: logger)
        configuration.maximumGracefulShutdownDuration = grace
        group = ServiceGroup(configuration: configuration)
    }

    /// Runs until the stop has ended (within the grace), and says what it left.
    public func run() async throws -> Outcome {
        try await group.run()
        return said.outcome.withLock { $0 }
    }
}

/// The HTTP door: ready once running; on the stop, no new connection, and the requests in flight
/// answered (until they are, or the grace ends).
struct DoorService: Service, CustomStringConvertible {
    let door: HTTPDoor
    let outcome: ServeGroup.Said
    let ready: @Sendable () -> Void
    let stopping: @Sendable () -> Void
    var description: String { "door" }

    func run() async {
        ready()
        // Returns on the stop (or throws on cancellation: the group ends, drain at once).
        try? await gracefulShutdown()
        stopping()
        let idle = await door.drain()
        outcome.set { $0.idle = idle }
    }
}

/// The inbox applier, run in a task of its own: on the stop it ends after its batch in progress;
/// cancelled (the grace over), the service returns without it (its rows are applied by the next
/// process).
struct ApplierService: Service, CustomStringConvertible {
    let applier: InboxApplier
    let outcome: ServeGroup.Said
    var description: String { "applier" }

    func run() async {
        let applier = self.applier
        let applying = Task { await applier.run() }
        try? await gracefulShutdown()
        applier.stop()
        let stopped = await untilCancelled { await applying.value } != nil
        outcome.set { $0.applierStopped = stopped }
    }
}

/// The webhook sender, in a task of its own: on the stop it leases nothing more, waits for its
/// attempts in flight and writes what they found; cancelled (the grace over), it returns without
/// them (their leases lapse, and the next sender sends them again with the same ids).
struct WebhookService: Service, CustomStringConvertible {
    let sender: WebhookSender
    let outcome: ServeGroup.Said
    var description: String { "webhook sender" }

    func run() async {
        let sender = self.sender
        let sending = Task { _ = await sender.run() }
        try? await gracefulShutdown()
        sender.stop()
        let stopped = await untilCancelled { await sending.value } != nil
        outcome.set { $0.webhooksStopped = stopped }
    }
}

/// The cancel page's recorder: on the stop, writes what it holds (until the grace ends).
struct RecorderService: Service, CustomStringConvertible {
    let retention: RetentionAnswerer
    let outcome: ServeGroup.Said
    var description: String { "cancel-page recorder" }

    func run() async {
        try? await gracefulShutdown()
        let retention = self.retention
        let recorded = await untilCancelled { await retention.flush() } != nil
        outcome.set { $0.recorded = recorded }
    }
}

/// Runs `work` until it ends, or until the calling task is cancelled (nil): the work is not
/// awaited past that (it ends on its own, its result dropped).
func untilCancelled<T: Sendable>(_ work: @escaping @Sendable () async -> T) async -> T? {
    let state = Mutex<(waiter: CheckedContinuation<T?, Never>?, result: T??)>((nil, nil))
    let finish: @Sendable (T?) -> Void = { value in
        let waiter = state.withLock { s -> CheckedContinuation<T?, Never>? in
            guard s.result == nil else { return nil }
            s.result = .some(value)
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: value)
    }
    Task { finish(await work()) }
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (c: CheckedContinuation<T?, Never>) in
            let done = state.withLock { s -> T?? in
                if let result = s.result { return .some(result) }
                s.waiter = c
                return nil
            }
            if let done { c.resume(returning: done) }
        }
    } onCancel: {
        finish(nil)
    }
}
