import AppStoreServerAPI
import ChurnStore
import Foundation
import Logging
import Polling
import Synchronization

/// `POST /apple/notifications`: Apple's App Store Server Notifications V2. Verified before any
/// write, stored durably, then 200; anything not stored is never a 200.
public final class NotificationReceiver: Sendable {
    private let apps: ServeApps
    private let writer: InboxWriter
    private let metrics: ServeMetrics
    private let budget: Duration
    private let stored: @Sendable () -> Void
    private let verified: VerifiedCache
    private let logger: Logger
    private let appleDoor: AppleDoor

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
        appleDoor = AppleDoor(noun: "notification", logger: logger) { metrics.rejected($0) }
    }

    /// The bundle id a notification claims (``AppleDoor``).
    static func claim(_ payload: String) -> ClaimRead<String> {
        let read = FeedSync.claim(payload)
        guard read.readable else { return .unreadable }
        if let bundleId = read.bundleId { return .names(bundleId) }
        // Rare (a refusal): the whole payload parsed, so a truncated one did not verify.
        let parts = payload.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(String(parts[1])),
              (try? JSONSerialization.jsonObject(with: Data(data))) is [String: Any] else { return .unreadable }
        return .none
    }

    public func receive(_ body: [UInt8]) async -> ServeResponse {
        let apps = self.apps
        let (payload, feed): (String, FeedSync)
        switch await appleDoor.admit(body, claim: Self.claim, find: { await apps.door($0) }) {
        case .failure(let refusal): return refusal.response
        case .success(let found): (payload, feed) = found
        }
        let app = feed.store.app
        let uuidVerified: UUID
        switch await feed.admit(payload) {
        case .rejected(let why):
            return appleDoor.refuse("verification", 403, "the notification did not verify: \(why.prefix(300))").response
        case .verified(let v):
            guard let uuid = UUID(uuidString: v.notificationUUID) else {
                return appleDoor.refuse("verification", 403, "the notification's notificationUUID is not a UUID").response
            }
            uuidVerified = uuid
            self.verified.put(uuid, bundleId: app, v)
        }
        let writer = self.writer
        switch await within(budget, { try await writer.store(payload, uuid: uuidVerified, app: app) }) {
        case .success(let new)?:
            metrics.received(stored: new)
            if new { stored() } else { self.verified.remove(uuidVerified) }
            return .text(200, new ? "stored" : "already known")
        case .failure(let error)?:
            verified.remove(uuidVerified)
            logger.error("a verified notification could not be stored: answered 503 (Apple delivers again)", metadata: ["error": "\(error)"])
            return .text(503, "the database is not answering: the notification was not stored (deliver again later)")
        case nil:
            // It may still be stored: then the applier reads and verifies it as any other row.
            verified.remove(uuidVerified)
            logger.error("storing a verified notification took longer than its budget: answered 503 (Apple delivers again)")
            return .text(503, "the database is not answering in time: the notification was not stored (deliver again later)")
        }
    }
}
