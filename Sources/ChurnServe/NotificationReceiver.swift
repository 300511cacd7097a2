import AppStoreServerAPI
import ChurnStore
import Foundation
import Logging
import Polling
import Synchronization

/// `POST /apple/notifications`: Apple's App Store Server Notifications V2. Verified before any
/// write, stored durably, then 200; anything not stored is never a 200.
public final class NotificationReceiver: Sendable {
    /// An app serve takes notifications for: its feed (which verifies as its sync does), or
    /// the one line saying why its settings cannot be used.
    public enum Door: Sendable {
        case open(FeedSync)
        case misconfigured(String)
    }

    private let apps: ServeApps
    private let writer: InboxWriter
    private let metrics: ServeMetrics
    private let budget: Duration
    private let stored: @Sendable () -> Void
    private let verified: VerifiedCache
    private let logger: Logger
    /// When a rejection was last logged, and how many were not logged since.
    private let logged = Mutex<(at: ContinuousClock.Instant?, quiet: Int)>((nil, 0))

    /// - Parameters:
    ///   - apps: the apps served, by bundle id (compared without case).
    ///   - budget: how long storing may take before the answer is a 503.
    ///   - stored: called after a notification was stored (wakes the applier).
    ///   - verified: where a verified notification is left for this process's applier.
    public init(apps: ServeApps, database: DatabaseStore, metrics: ServeMetrics, budget: Duration, logger: Logger,
                verified: VerifiedCache, stored: @escaping @Sendable () -> Void) {
        (self.apps, self.metrics, self.budget, self.logger, self.stored) = (apps, metrics, budget, logger, stored)
        writer = InboxWriter(database: database)
        self.verified = verified
    }

    struct Body: Decodable {
        var signedPayload: String
    }

    public func receive(_ body: [UInt8]) async -> ServeResponse {
        guard let payload = try? JSONDecoder().decode(Body.self, from: Data(body)).signedPayload, !payload.isEmpty else {
            return reject("body", 400, "the body is not a JSON object with a signedPayload string")
        }
        let claimed = FeedSync.claimedBundleId(payload)
        guard let claimed, let door = await apps.door(claimed) else {
            return reject("unknown_app", 403, "the notification names no app of this database (\((claimed ?? "no readable bundle id").prefix(160)))")
        }
        let feed: FeedSync
        switch door {
        case .misconfigured(let why):
            // Not the sender's fault: Apple delivers again, and the history sync is the net.
            logger.error("a notification for an app whose settings cannot be used", metadata: ["bundle_id": "\(claimed)", "error": "\(why)"])
            return .text(503, "this app's settings cannot be used here: the operator must fix them")
        case .open(let f):
            feed = f
        }
        let uuidVerified: UUID
        switch await feed.admit(payload) {
        case .rejected(let why):
            return reject("verification", 403, "the notification did not verify: \(why.prefix(300))")
        case .verified(let v):
            guard let uuid = UUID(uuidString: v.notificationUUID) else {
                return reject("verification", 403, "the notification's notificationUUID is not a UUID")
            }
            uuidVerified = uuid
            self.verified.put(payload, v)
        }
        let writer = self.writer
        switch await within(budget, { try await writer.store(payload, uuid: uuidVerified) }) {
        case .success(let new)?:
            metrics.received(stored: new)
            if new { stored() } else { _ = self.verified.take(payload) }
            return .text(200, new ? "stored" : "already known")
        case .failure(let error)?:
            logger.error("a verified notification could not be stored: answered 503 (Apple delivers again)", metadata: ["error": "\(error)"])
            return .text(503, "the database is not answering: the notification was not stored (deliver again later)")
        case nil:
            logger.error("storing a verified notification took longer than its budget: answered 503 (Apple delivers again)")
            return .text(503, "the database is not answering in time: the notification was not stored (deliver again later)")
        }
    }

    /// A 4xx, counted, and logged at most once per 10 seconds (a forger cannot fill the log).
    private func reject(_ kind: String, _ status: Int, _ why: String) -> ServeResponse {
        metrics.rejected(kind)
        let now = ContinuousClock.now
        let quiet: Int? = logged.withLock { state in
            if let at = state.at, now - at < .seconds(10) {
                state.quiet += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.quiet
        }
        if let quiet {
            logger.warning("a notification was refused", metadata: ["status": "\(status)", "why": "\(why)", "refused_unlogged_before": "\(quiet)"])
        }
        return .text(status, why)
    }
}
