import AppStoreSimulator
import ArgumentParser
import Foundation

/// Options of the simulated app's App Store Server Notifications V2 (serve).
struct NotificationFlags: ParsableArguments {
    @Flag(help: "The app has no notification URL: Apple sends no notifications and the notification history is empty.")
    var noNotificationUrl = false

    @Option(help: "Share of changes that produce no notification at all (chosen per change from the seed; /_sim/events says which).")
    var unnotifiedShare = 0.0

    @Option(help: "Share of notifications whose delivery fails (half recover on the retry an hour later); see onlyFailures.")
    var notificationFailureShare = 0.0

    @Option(help: "Deliver each notification as Apple does: POST {\"signedPayload\": ...} to this URL (every app; Production and, unless --sandbox-notification-url, Sandbox) when the clock passes its signedDate; anything but 200-206 is retried 1, 12, 24, 48 and 72 simulated hours later (Production; Sandbox: one attempt). The history's sendAttempts show each attempt.")
    var notificationUrl: String?

    @Option(help: "The Sandbox notification URL (default: --notification-url).")
    var sandboxNotificationUrl: String?

    @Option(help: "Deliver only notifications signed after this moment (ISO 8601; default: the clock at start): what was signed before is history.")
    var deliverAfter: String?

    @Option(help: "Share of delivery attempts not made (recorded NO_RESPONSE, retried on Apple's schedule), drawn per attempt from the seed.")
    var dropDeliveries = 0.0

    /// Where notifications are delivered; nil when they are not.
    func delivery() throws -> DeliveryOptions? {
        guard notificationUrl != nil || sandboxNotificationUrl != nil else {
            guard dropDeliveries == 0 else { throw ValidationError("--drop-deliveries needs --notification-url") }
            return nil
        }
        guard !noNotificationUrl else { throw ValidationError("--notification-url and --no-notification-url contradict each other") }
        guard (0...1).contains(dropDeliveries) else { throw ValidationError("--drop-deliveries: a share from 0 to 1, got \(dropDeliveries)") }
        for url in [notificationUrl, sandboxNotificationUrl].compactMap({ $0 }) {
            guard let u = URL(string: url), ["http", "https"].contains(u.scheme ?? ""), u.host != nil else {
                throw ValidationError("--notification-url \(url): not an http(s) URL")
            }
        }
        var o = DeliveryOptions()
        o.production = notificationUrl
        o.sandbox = sandboxNotificationUrl
        o.dropShare = dropDeliveries
        if let t = deliverAfter {
            guard let ms = SimTime.parse(t) else { throw ValidationError("--deliver-after \(t): not an ISO 8601 time") }
            o.after = ms
        }
        return o
    }

    func options() throws -> NotificationOptions {
        for (name, v) in [("--unnotified-share", unnotifiedShare), ("--notification-failure-share", notificationFailureShare)]
        where !(0...1).contains(v) {
            throw ValidationError("\(name): a share from 0 to 1, got \(v)")
        }
        var o = NotificationOptions()
        o.hasURL = !noNotificationUrl
        o.unnotifiedShare = unnotifiedShare
        o.failedDeliveryShare = notificationFailureShare
        return o
    }
}
