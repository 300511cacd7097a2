/// App Store Server Notifications V2 for the simulated timelines: which change sends which
/// notification (docs/apple-api.md, "Notifications V2"), whether the app received it, and its delivery attempts.
/// Pure: a function of the population, the options and the moment.

/// How the simulated app receives notifications.
public struct NotificationOptions: Sendable, Hashable {
    /// The app has a notification URL configured. Without one Apple sends nothing and the
    /// notification history is empty.
    public var hasURL = true
    /// Share of changes that produce no notification at all (chosen per change from the seed).
    public var unnotifiedShare = 0.0
    /// Share of notifications whose first delivery attempt fails; half of them succeed on
    /// Apple's first retry an hour later, the others never reach the app (`onlyFailures`).
    public var failedDeliveryShare = 0.0

    public init() {}
}

/// One notification: the change it reports (subscription and timeline position) and its type.
public struct SimNotification: Sendable, Hashable {
    public var subscriber: Int
    /// Position of the change in the subscription's timeline.
    public var eventIndex: Int
    /// The moment of the change, the notification's `signedDate` (ms since 1970).
    public var time: Int64
    public var type: String
    public var subtype: String?
}

/// One delivery attempt of a notification (`sendAttempts[]`).
public struct SimSendAttempt: Sendable, Hashable {
    public var date: Int64
    public var result: String
}

public enum NotificationTypes {
    /// The notification a timeline event sends: `notificationType` and `subtype`.
    public static func of(_ e: TimelineEvent) -> (type: String, subtype: String?) {
        switch e.kind {
        case .purchase: ("SUBSCRIBED", "INITIAL_BUY")
        case .resubscribe: ("SUBSCRIBED", "RESUBSCRIBE")
        case .renewal: ("DID_RENEW", nil)
        case .recovery: ("DID_RENEW", "BILLING_RECOVERY")
        case .upgrade: ("DID_CHANGE_RENEWAL_PREF", "UPGRADE")
        case .planChangeScheduled: ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE")
        case .planChangeCancelled: ("DID_CHANGE_RENEWAL_PREF", nil)
        case .autoRenewOff: ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED")
        case .autoRenewOn: ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED")
        case .billingFailure: ("DID_FAIL_TO_RENEW", e.d > 0 ? "GRACE_PERIOD" : nil)
        case .graceExpired: ("GRACE_PERIOD_EXPIRED", nil)
        case .expire: ("EXPIRED", expiredSubtype(intent: Int(e.a)))
        case .priceIncreaseNotified: ("PRICE_INCREASE", e.a == 1 ? "PENDING" : "ACCEPTED")
        case .priceIncreaseAccepted: ("PRICE_INCREASE", "ACCEPTED")
        case .refund: ("REFUND", nil)
        case .refundReversed: ("REFUND_REVERSED", nil)
        case .familyRevoke: ("REVOKE", nil)
        case .consumptionRequest: ("CONSUMPTION_REQUEST", nil)
        case .refundDeclined: ("REFUND_DECLINED", nil)
        }
    }

    static func expiredSubtype(intent: Int) -> String? {
        switch intent {
        case 1: "VOLUNTARY"
        case 2: "BILLING_RETRY"
        case 3: "PRICE_INCREASE"
        case 4: "PRODUCT_NOT_FOR_SALE"
        default: nil
        }
    }

    /// Apple's notification types and the subtypes each may carry (§8), for the history filters.
    public static let subtypes: [String: Set<String>] = [
        "SUBSCRIBED": ["INITIAL_BUY", "RESUBSCRIBE"],
        "DID_CHANGE_RENEWAL_STATUS": ["AUTO_RENEW_DISABLED", "AUTO_RENEW_ENABLED"],
        "DID_CHANGE_RENEWAL_PREF": ["UPGRADE", "DOWNGRADE"],
        "OFFER_REDEEMED": ["UPGRADE", "DOWNGRADE", "INITIAL_BUY", "RESUBSCRIBE"],
        "DID_RENEW": ["BILLING_RECOVERY"],
        "DID_FAIL_TO_RENEW": ["GRACE_PERIOD"],
        "GRACE_PERIOD_EXPIRED": [],
        "EXPIRED": ["VOLUNTARY", "BILLING_RETRY", "PRICE_INCREASE", "PRODUCT_NOT_FOR_SALE"],
        "PRICE_INCREASE": ["PENDING", "ACCEPTED"],
        "REFUND": [], "REFUND_DECLINED": [], "REFUND_REVERSED": [], "REVOKE": [], "CONSUMPTION_REQUEST": [],
        "RENEWAL_EXTENDED": [], "RENEWAL_EXTENSION": ["SUMMARY", "FAILURE"],
        "TEST": [], "EXTERNAL_PURCHASE_TOKEN": ["UNREPORTED"], "ONE_TIME_CHARGE": [], "RESCIND_CONSENT": [],
        "METADATA_UPDATE": [], "MIGRATION": [], "PRICE_CHANGE": [],
    ]

    /// Apple's `sendAttemptResult` values for a failed attempt.
    static let failures = ["TIMED_OUT", "TLS_ISSUE", "NO_RESPONSE", "SOCKET_ISSUE", "UNSUCCESSFUL_HTTP_RESPONSE_CODE"]
    /// Apple's retry schedule after a failed attempt: 1, 12, 24, 48 and 72 hours.
    static let retryHours: [Int64] = [1, 12, 24, 48, 72]
}

extension Population {
    /// The notification the `k`-th event of subscription `i` sends, whether or not it is delivered.
    public func notification(_ i: Int, _ k: Int) -> SimNotification {
        let e = timeline(i)[timeline(i).startIndex + k]
        let (type, subtype) = NotificationTypes.of(e)
        return SimNotification(subscriber: i, eventIndex: k, time: e.time, type: type, subtype: subtype)
    }

    /// What the draws of change `k` of subscription `i` (notified, UUID, delivery) are labelled
    /// with: its position among the subscription's changes that are no refund request; refund
    /// requests and declines count apart, from 2^32. Adding them moves no other notification.
    func notificationKey(_ i: Int, _ k: Int) -> UInt64 {
        let tl = timeline(i)
        var requests = 0
        for e in tl.prefix(k) where e.isRefundRequest { requests += 1 }
        return Self.notificationKey(tl[tl.startIndex + k], position: k, requestsBefore: requests)
    }

    private static func notificationKey(_ e: TimelineEvent, position k: Int, requestsBefore requests: Int) -> UInt64 {
        e.isRefundRequest ? (1 << 32) + UInt64(requests) : UInt64(k - requests)
    }

    /// Whether the change whose draws are labelled `key` produced a notification.
    private func isNotified(_ i: Int, key: UInt64, options: NotificationOptions) -> Bool {
        guard options.hasURL else { return false }
        guard options.unnotifiedShare > 0 else { return true }
        var r = SimRandom(config.seed, UInt64(i), key, 41)
        return !r.chance(options.unnotifiedShare)
    }

    /// Whether the `k`-th change of subscription `i` produced a notification.
    public func isNotified(_ i: Int, _ k: Int, options: NotificationOptions) -> Bool {
        guard options.hasURL else { return false }
        guard options.unnotifiedShare > 0 else { return true }
        return isNotified(i, key: notificationKey(i, k), options: options)
    }

    /// The notification's `notificationUUID`: the same for the same seed, subscription and change.
    public func notificationUUID(_ i: Int, _ k: Int) -> String {
        var r = SimRandom(config.seed, UInt64(i), notificationKey(i, k), 42)
        let a = r.next(), b = r.next()
        func hex(_ v: UInt64, _ digits: Int) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: max(0, digits - s.count)) + s
        }
        let version = hex(0x4000 | (a & 0x0FFF), 4), variant = hex(0x8000 | ((b >> 48) & 0x3FFF), 4)
        return "\(hex(a >> 32, 8))-\(hex((a >> 16) & 0xFFFF, 4))-\(version)-\(variant)-\(hex(b & 0xFFFF_FFFF_FFFF, 12))"
    }

    /// Delivery attempts of the notification of change `k` of subscription `i` made by `now`.
    public func sendAttempts(_ i: Int, _ k: Int, at time: Int64, now: Int64, options: NotificationOptions)
        -> [SimSendAttempt]
    {
        var r = SimRandom(config.seed, UInt64(i), notificationKey(i, k), 43)
        guard options.failedDeliveryShare > 0, r.chance(options.failedDeliveryShare) else {
            return [SimSendAttempt(date: time, result: "SUCCESS")]
        }
        let reason = NotificationTypes.failures[Int(r.next() % UInt64(NotificationTypes.failures.count))]
        var out = [SimSendAttempt(date: time, result: reason)]
        if r.chance(0.5) {
            out.append(SimSendAttempt(date: time + SimTime.hour, result: "SUCCESS"))
        } else {
            out += NotificationTypes.retryHours.map { SimSendAttempt(date: time + $0 * SimTime.hour, result: reason) }
        }
        return out.filter { $0.date <= now }
    }

    /// Every change of subscription `i` that produced a notification, in timeline order.
    public func notifiedChanges(_ i: Int, options: NotificationOptions) -> [Int] {
        guard options.hasURL else { return [] }
        var out: [Int] = []
        var requests = 0
        for (k, e) in timeline(i).enumerated() {
            if isNotified(i, key: Self.notificationKey(e, position: k, requestsBefore: requests), options: options) { out.append(k) }
            if e.isRefundRequest { requests += 1 }
        }
        return out
    }
}
