import Foundation

/// The events of docs/contracts.md. Raw values are the contract written to
/// `churnwatch.churn_events.event`; the case order is the tie-break when two events share
/// `occurredAt`.
public enum ChurnEventType: String, Sendable, Codable, CaseIterable {
    case autoRenewDisabled = "auto_renew_disabled"
    case autoRenewEnabled = "auto_renew_enabled"
    case billingRetryStarted = "billing_retry_started"
    case gracePeriodStarted = "grace_period_started"
    case gracePeriodExpired = "grace_period_expired"
    case billingRecovered = "billing_recovered"
    case renewed
    case expired
    case refunded
    case refundReversed = "refund_reversed"
    case planChangeScheduled = "plan_change_scheduled"
    case planChangeCancelled = "plan_change_cancelled"
    case planChanged = "plan_changed"
    case priceIncreasePending = "price_increase_pending"
    case priceIncreaseAccepted = "price_increase_accepted"
    case resubscribed
    /// The customer opened the subscription's page in the App Store (where Cancel is) and
    /// churnwatch answered Apple's Get Retention Message request (`churnwatch serve`). Not a
    /// change of the subscription: logged by serve, never by a snapshot difference.
    case cancelPageViewed = "cancel_page_viewed"

    var rank: Int { Self.allCases.firstIndex(of: self) ?? Int.max }
}

/// Old and new values of an event, as flat JSON (`jsonb`). Keys are snake_case; dates are
/// ISO 8601 UTC with milliseconds; absent values are left out. Every event carries
/// `occurred_at_basis`: the Apple field its time comes from, or `detected` for the poll time.
public typealias EventDetails = [String: String]

/// One change of a subscription, proved by the difference of two snapshots.
public struct ChurnEvent: Sendable, Equatable, Hashable, Codable {
    public var type: ChurnEventType
    /// The best time known: a renewal, purchase, expiry or revocation date when Apple gives
    /// one, else the detection time (`asOf`). Never later than `asOf`.
    public var occurredAt: Date
    public var details: EventDetails

    public init(type: ChurnEventType, occurredAt: Date, details: EventDetails = [:]) {
        self.type = type
        self.occurredAt = occurredAt
        self.details = details
    }

    private enum CodingKeys: String, CodingKey {
        case type = "event"
        case occurredAt = "occurred_at_ms"
        case details
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decode(ChurnEventType.self, forKey: .type)
        occurredAt = try c.decodeMilliseconds(forKey: .occurredAt) ?? Date(timeIntervalSince1970: 0)
        details = try c.decodeIfPresent(EventDetails.self, forKey: .details) ?? [:]
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(type, forKey: .type)
        try c.encodeMilliseconds(occurredAt, forKey: .occurredAt)
        try c.encode(details, forKey: .details)
    }
}

/// What `ChangeDetector.events` found.
public struct DetectionResult: Sendable, Equatable {
    /// The events, ordered by `occurredAt`, then by `ChurnEventType` case order.
    public var events: [ChurnEvent]
    /// The current snapshot is older (by `signedDate`) than the previous one: no events, and
    /// the caller must not overwrite the stored snapshot with it.
    public var stale: Bool
    /// There was no previous snapshot to compare with (the first successful poll), or it
    /// belongs to another subscription: the current one establishes the state, no events.
    public var isBaseline: Bool
    /// Raw values of the current snapshot this version doesn't know. With an unknown status
    /// (now or before) no events are produced at all.
    public var unknownValues: [UnknownValue]

    public init(events: [ChurnEvent], stale: Bool, isBaseline: Bool, unknownValues: [UnknownValue]) {
        self.events = events
        self.stale = stale
        self.isBaseline = isBaseline
        self.unknownValues = unknownValues
    }

    /// Whether the current snapshot should replace the stored one.
    public var shouldStore: Bool { !stale }
}
