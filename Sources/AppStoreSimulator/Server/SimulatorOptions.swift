/// A fault a subscriber's signed payloads carry, for churnwatch's verification and robustness.
public enum PayloadFault: String, CaseIterable, Sendable {
    /// Signed by a chain under a root nobody trusts.
    case rogueChain = "rogue_chain"
    /// The JWS string cut short.
    case truncatedJWS = "truncated_jws"
    /// Validly signed, with enum values Apple hasn't invented yet and extra fields.
    case unknownValues = "unknown_values"
    /// Validly signed, but the transaction's `bundleId` is another app's.
    case foreignBundle = "foreign_bundle"
}

/// The environment a port serves, as Apple serves each on its own host.
public enum SimEnvironment: String, Sendable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// Limits and faults of a running simulator.
public struct SimulatorOptions: Sendable {
    /// Requests per second per endpoint (and environment); nil means unlimited.
    public var rate: Double?
    /// Bucket size; defaults to ``rate``. Apple's hourly enforcement is `rate × 3600`.
    public var burst: Double?
    /// Added to every /inApps answer, plus a uniform jitter of up to ``latencyJitterMs``.
    public var latencyMs = 0
    public var latencyJitterMs = 0
    /// Probability of a 500 `GeneralInternalRetryable` (5000001) per /inApps request.
    public var errorRate = 0.0
    /// Probability that a request is never answered (the connection is held, then closed).
    public var timeoutRate = 0.0
    /// Probability that the connection is closed without an answer.
    public var dropRate = 0.0
    /// Share of subscribers whose payloads carry one of ``faultKinds`` (chosen per subscriber).
    public var faultRate = 0.0
    public var faultKinds: [PayloadFault] = PayloadFault.allCases
    /// How many subscribers' signed status items are cached (about 1.3 KB each).
    public var cacheCapacity = 120_000
    /// How long a "timeout" holds the connection before closing it.
    public var timeoutHoldMs = 120_000
    /// Reject bearer tokens without `iat` (401), stricter than Apple, which accepts them (its
    /// own Python library sends none): for tests of churnwatch's own tokens.
    public var requireIssuedAt = false
    /// Notifications V2: whether the app has a notification URL, and which changes it hears of.
    public var notifications = NotificationOptions()
    /// Probability that a customer who redeems a save offer (`POST /_sim/offers/redeem`) with
    /// auto-renew off is saved (drawn once per subscription from the seed).
    public var offerEffect = 0.0
    /// Per offer identifier (`--offer-effect-by`): the probability for a redemption naming that
    /// `offer_id`; others use ``offerEffect``. The same draw for every offer.
    public var offerEffectByOffer: [String: Double] = [:]
    /// Probability that an answer in time to a refund request turns Apple's decision the way
    /// its `refundPreference` asks (drawn once per request from the seed).
    public var consumptionAnswerEffect = 0.5
    /// The Retention Messaging API and the cancel page's simulated views.
    public var retention = RetentionOptions()

    public init() {}
}
