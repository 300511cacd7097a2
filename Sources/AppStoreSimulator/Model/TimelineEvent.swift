/// One thing that happens to a subscription, at a moment. A subscription's life is a sorted array
/// of these, generated once; everything the API answers at time T is a fold of the events at or
/// before T. 16 bytes each, so 100,000 subscribers with years of renewals stay small.
public struct TimelineEvent: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        /// First purchase. `a` product, `b` offer, `c` price tier.
        case purchase
        /// Apple renewed the subscription. `a` product, `b` offer, `c` price tier.
        case renewal
        /// A renewal that succeeded during billing retry. `a` product, `b` offer, `c` tier.
        case recovery
        /// Immediate upgrade to a higher level: a new transaction now; the old one `isUpgraded`.
        case upgrade
        /// A purchase after expiry, same `originalTransactionId`. `a` product, `b` offer, `c` tier.
        case resubscribe
        case autoRenewOff
        /// `b` is a promotional offer that applies at the next renewal (0 none).
        case autoRenewOn
        /// The renewal charge failed; billing retry starts. `d` grace days (0 no grace).
        case billingFailure
        case graceExpired
        /// `a` expiration intent (1–5).
        case expire
        /// The latest transaction was refunded. `a` revocation reason, `b` 0 full / 1 prorated,
        /// `c` refunded percent.
        case refund
        case refundReversed
        /// Family Sharing access ended (`FAMILY_REVOKE`).
        case familyRevoke
        /// The next renewal will be into product `a` (downgrade or crossgrade).
        case planChangeScheduled
        case planChangeCancelled
        /// A price increase was announced. `a` 1 needs consent, 0 no consent needed.
        case priceIncreaseNotified
        case priceIncreaseAccepted
        /// The customer asked Apple for a refund of the latest transaction, and Apple asks the app
        /// for consumption information (`CONSUMPTION_REQUEST`). `a` reason
        /// (``ConsumptionRequestReason``), `d` seconds until Apple decides: a `refund` or a
        /// `refundDeclined` at exactly that moment. Changes no state.
        case consumptionRequest
        /// Apple declined a refund request (`REFUND_DECLINED`). Changes no state.
        case refundDeclined
    }

    /// Milliseconds since 1970.
    public var time: Int64
    public var kind: Kind
    public var a: UInt8
    public var b: UInt8
    public var c: UInt8
    public var d: UInt32

    public init(_ time: Int64, _ kind: Kind, a: UInt8 = 0, b: UInt8 = 0, c: UInt8 = 0, d: UInt32 = 0) {
        self.time = time
        self.kind = kind
        self.a = a
        self.b = b
        self.c = c
        self.d = d
    }

    /// A refund request or its decline: a notification and a truth event, no change of state.
    public var isRefundRequest: Bool { kind == .consumptionRequest || kind == .refundDeclined }

    /// Whether this event creates a transaction.
    public var createsTransaction: Bool {
        switch kind {
        case .purchase, .renewal, .recovery, .upgrade, .resubscribe: true
        default: false
        }
    }
}

/// Why a customer asked for a refund (`consumptionRequestReason`), as stored in a
/// ``TimelineEvent/Kind/consumptionRequest``'s `a`.
public enum ConsumptionRequestReason: UInt8, Sendable, CaseIterable {
    case unintendedPurchase = 1
    case fulfillmentIssue
    case unsatisfiedWithPurchase
    case legal
    case other

    /// Apple's value.
    public var apple: String {
        switch self {
        case .unintendedPurchase: "UNINTENDED_PURCHASE"
        case .fulfillmentIssue: "FULFILLMENT_ISSUE"
        case .unsatisfiedWithPurchase: "UNSATISFIED_WITH_PURCHASE"
        case .legal: "LEGAL"
        case .other: "OTHER"
        }
    }
}

/// The offer applied to a transaction or a coming renewal.
public enum SimOffer: UInt8, Sendable {
    case none = 0
    /// Introductory free trial.
    case freeTrial
    /// Introductory pay-as-you-go discount (first three months).
    case introPayAsYouGo
    /// A promotional offer (a save offer accepted when turning auto-renew back on).
    case promotional
    /// A win-back offer used to resubscribe.
    case winBack
    /// An offer code redeemed at purchase.
    case offerCode

    /// Apple's `offerType`.
    public var offerType: Int32? {
        switch self {
        case .none: nil
        case .freeTrial, .introPayAsYouGo: 1
        case .promotional: 2
        case .offerCode: 3
        case .winBack: 4
        }
    }

    /// Apple's `offerDiscountType`.
    public var discountType: String? {
        switch self {
        case .none: nil
        case .freeTrial: "FREE_TRIAL"
        case .introPayAsYouGo, .promotional, .winBack: "PAY_AS_YOU_GO"
        case .offerCode: "PAY_UP_FRONT"
        }
    }

    /// `offerIdentifier` (introductory offers carry none).
    public func identifier(group: String) -> String? {
        switch self {
        case .none, .freeTrial, .introPayAsYouGo: nil
        case .promotional: "sim.promo.\(group).save50"
        case .winBack: "sim.winback.\(group).50off"
        case .offerCode: "SIMCODE-\(group.uppercased())"
        }
    }
}
