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

    /// The body's `signedPayload`: read directly when the body is exactly Apple's
    /// `{"signedPayload":"..."}` with a value free of escapes (a JWS always is), else by
    /// JSONDecoder (other spacing, other members).
    static func signedPayload(_ body: [UInt8]) -> String? {
        if let direct = plainSignedPayload(body) { return direct }
        return try? JSONDecoder().decode(Body.self, from: Data(body)).signedPayload
    }

    private static let member = Array(#""signedPayload""#.utf8)

    static func plainSignedPayload(_ body: [UInt8]) -> String? {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }
        var i = 0
        func skip() { while i < body.count, isSpace(body[i]) { i += 1 } }
        func take(_ b: UInt8) -> Bool {
            skip()
            guard i < body.count, body[i] == b else { return false }
            i += 1
            return true
        }
        guard take(0x7B) else { return nil }
        skip()
        guard body.count - i >= member.count, body[i..<(i + member.count)].elementsEqual(member) else { return nil }
        i += member.count
        guard take(0x3A), take(0x22) else { return nil }
        let start = i
        while i < body.count, body[i] != 0x22 {
            // Escapes and control characters: JSONDecoder's to read.
            guard body[i] != 0x5C, body[i] >= 0x20 else { return nil }
            i += 1
        }
        guard i < body.count else { return nil }
        let value = body[start..<i]
        i += 1
        guard take(0x7D) else { return nil }
        skip()
        guard i == body.count else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    public func receive(_ body: [UInt8]) async -> ServeResponse {
        guard let payload = Self.signedPayload(body), !payload.isEmpty else {
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
            self.verified.put(uuid, bundleId: claimed, v)
        }
        let writer = self.writer, app = feed.store.app
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
