import AppStoreSimulator
import ArgumentParser

/// Options of the simulated app's App Store Server Notifications V2 (serve).
struct NotificationFlags: ParsableArguments {
    @Flag(help: "The app has no notification URL: Apple sends no notifications and the notification history is empty.")
    var noNotificationUrl = false

    @Option(help: "Share of changes that produce no notification at all (chosen per change from the seed; /_sim/events says which).")
    var unnotifiedShare = 0.0

    @Option(help: "Share of notifications whose delivery fails (half recover on the retry an hour later); see onlyFailures.")
    var notificationFailureShare = 0.0

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
