import AppStoreModels
import Foundation

/// What the app recorded about a customer for refund requests (`churnwatch.refund_consent`).
public struct RefundConsent: Sendable, Equatable {
    /// Whether the customer agreed to share consumption data with Apple. Without it nothing is sent.
    public var customerConsented: Bool
    /// nil: delivered (the app did not say otherwise).
    public var deliveryStatus: DeliveryStatus?
    /// nil: churnwatch decides from what it holds (a free trial of the subscription).
    public var sampleContentProvided: Bool?

    public init(customerConsented: Bool, deliveryStatus: DeliveryStatus? = nil, sampleContentProvided: Bool? = nil) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
    }
}

/// One refund request as the answer needs it: when Apple asked, until when it listens, and the
/// period of the transaction the customer wants back (from its signed transaction).
public struct RefundRequestFacts: Sendable, Equatable {
    public var requestedAt: Date
    public var deadline: Date
    public var periodStart: Date?
    public var periodEnd: Date?
    /// A free trial of this subscription is on record (the sample when the app says nothing).
    public var trialSeen: Bool

    public init(requestedAt: Date, deadline: Date, periodStart: Date?, periodEnd: Date?, trialSeen: Bool) {
        self.requestedAt = requestedAt
        self.deadline = deadline
        self.periodStart = periodStart
        self.periodEnd = periodEnd
        self.trialSeen = trialSeen
    }

    /// How much of the paid period had passed when the customer asked (0...1); nil without a period.
    public var shareElapsed: Double? {
        guard let start = periodStart, let end = periodEnd, end > start else { return nil }
        return min(1, max(0, requestedAt.timeIntervalSince(start) / end.timeIntervalSince(start)))
    }
}

/// Which rule of the policy decided an answer (`refund_requests.policy_branch`).
public enum RefundBranch: String, Sendable, CaseIterable, Codable {
    /// No consent on record, or the customer refused: nothing is sent (Apple rejects it anyway).
    case noConsent = "no_consent"
    /// The deadline passed before an answer could go out: nothing is sent.
    case expired
    /// The app says the purchase was not delivered: its delivery status, no preference.
    case undelivered
    /// Delivered and at least the configured share of the period used: `DECLINE`.
    case declineConsumed = "decline_consumed"
    /// Delivered, the rest: the facts, no preference.
    case noPreference = "no_preference"
}

/// The answer to one refund request: the rule that decided it and the body to send (nil: send nothing).
public struct RefundAnswer: Sendable, Equatable {
    public var branch: RefundBranch
    public var body: ConsumptionRequest?

    public init(branch: RefundBranch, body: ConsumptionRequest?) {
        self.branch = branch
        self.body = body
    }
}

/// How churnwatch answers Apple's `CONSUMPTION_REQUEST` (docs/contracts.md, "Refund requests").
/// Pure: the same facts give the same answer.
public struct RefundAnswerPolicy: Sendable, Equatable {
    /// Prefer `DECLINE` for a delivered purchase when at least this share of its period had
    /// passed at the request (0...1); nil: never state a preference.
    public var declineAfterShare: Double?

    public init(declineAfterShare: Double? = nil) { self.declineAfterShare = declineAfterShare }

    /// The answer at `now`: nothing after the deadline or without consent; otherwise the
    /// delivery status, whether a sample was provided (the app's word, else a free trial on
    /// record), and the preference the policy gives. No `consumptionPercentage`: for an
    /// auto-renewable subscription Apple computes it.
    public func answer(_ request: RefundRequestFacts, consent: RefundConsent?, now: Date) -> RefundAnswer {
        guard now < request.deadline else { return RefundAnswer(branch: .expired, body: nil) }
        guard let consent, consent.customerConsented else { return RefundAnswer(branch: .noConsent, body: nil) }
        let delivery = consent.deliveryStatus ?? .delivered
        var body = ConsumptionRequest(customerConsented: true, sampleContentProvided: consent.sampleContentProvided ?? request.trialSeen,
                                      deliveryStatus: delivery)
        guard delivery == .delivered else { return RefundAnswer(branch: .undelivered, body: body) }
        if let threshold = declineAfterShare, let share = request.shareElapsed, share >= threshold {
            body.refundPreference = .decline
            return RefundAnswer(branch: .declineConsumed, body: body)
        }
        return RefundAnswer(branch: .noPreference, body: body)
    }

    /// Apple takes consumption information for 12 hours after its request.
    public static let answerWindow: TimeInterval = 12 * 3600
}
