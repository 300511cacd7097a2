import Foundation

/// The change an App Store Server Notification V2 names (`notificationType` and `subtype`), as
/// the event it stands for. Pure.
///
/// A notification is an observation like a poll's answer: its events are the difference between
/// the stored state and the state it carries (``ChangeDetector/events(previous:current:asOf:)``).
/// That difference is empty when an earlier change Apple never notified already left the stored
/// state where this one ends (auto-renew turned off unnotified, then on again notified): Apple
/// still says the named change happened, at the notification's `signedDate`, and that is logged.
/// (A renewal notified after a resubscribe that was not: the difference shows the resubscribe,
/// and the renewal is logged too.)
public enum NotifiedChange {
    /// The event a notification names, for the kinds whose difference an unnotified earlier
    /// change can hide; nil for any other notification.
    public static func event(notificationType: String?, subtype: String?) -> ChurnEventType? {
        switch (notificationType, subtype) {
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED"): .autoRenewEnabled
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"): .autoRenewDisabled
        case ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE"): .planChangeScheduled
        case ("DID_CHANGE_RENEWAL_PREF", nil): .planChangeCancelled
        case ("PRICE_INCREASE", "PENDING"): .priceIncreasePending
        case ("PRICE_INCREASE", "ACCEPTED"): .priceIncreaseAccepted
        // A renewal after a resubscribe Apple never notified: the difference shows the resubscribe.
        case ("DID_RENEW", nil): .renewed
        // A recovery whose failure Apple never notified: the difference shows a renewal
        // (`billing_recovered` is not also `renewed`).
        case ("DID_RENEW", "BILLING_RECOVERY"): .billingRecovered
        case ("SUBSCRIBED", "RESUBSCRIBE"): .resubscribed
        default: nil
        }
    }

    /// `events` (the difference's) with the named change added when the difference does not
    /// show it but the state the notification carries does (so a notification whose state
    /// contradicts its name adds nothing). No event for a first observation (a baseline).
    public static func completing(_ events: [ChurnEvent], named: ChurnEventType?, previous: SubscriptionSnapshot?,
                                  current c: SubscriptionSnapshot, signedDate: Date) -> [ChurnEvent] {
        guard let named, let p = previous, p.state != .unknown, c.state != .unknown,
              !events.contains(where: { $0.type == named }), shows(named, c) else { return events }
        if named == .billingRecovered, let renewal = events.firstIndex(where: { $0.type == .renewed }) {
            // Apple calls the renewal a recovery: the failure before it went unnotified. Which
            // kind of spell it was (grace or retry) nothing says, so only the recovery is logged.
            var events = events
            events[renewal].type = .billingRecovered
            events[renewal].details["notified"] = "true"
            return events
        }
        var details: EventDetails = ["product_id": c.productId, "old_state": p.state.rawValue, "new_state": c.state.rawValue,
                                     "occurred_at_basis": "signedDate", "notified": "true"]
        details["in_app_ownership_type"] = c.rawOwnershipType
        let event = ChurnEvent(type: named, occurredAt: signedDate, details: details)
        return (events + [event]).sorted { a, b in a.occurredAt != b.occurredAt ? a.occurredAt < b.occurredAt : a.type.rank < b.type.rank }
    }

    /// The state `c` is the one the change ends in.
    static func shows(_ type: ChurnEventType, _ c: SubscriptionSnapshot) -> Bool {
        switch type {
        case .autoRenewEnabled: c.autoRenew == true
        case .autoRenewDisabled: c.autoRenew == false && c.state == .active
        case .planChangeScheduled: c.autoRenewProductId.map { $0 != c.productId } ?? false
        case .planChangeCancelled: c.autoRenewProductId == c.productId
        case .priceIncreasePending: c.rawPriceIncreaseStatus == 0
        case .priceIncreaseAccepted: c.rawPriceIncreaseStatus == 1
        case .renewed, .resubscribed, .billingRecovered: c.state == .active
        default: false
        }
    }
}
