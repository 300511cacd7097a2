/// What a cancel-page view showed the customer (`/_sim/retention/views`' `shown`).
public enum CancelPageShown: String, Sendable, CaseIterable {
    /// The default message (Apple's, configured per product and locale): no answer, a late,
    /// failed or invalid one, an unapproved message, or a plain message that is a default one.
    case standard = "default"
    case message
    case alternateProduct = "alternate_product"
    case promotionalOffer = "promotional_offer"
}

/// Probability, per kind of answer shown, that a customer who came to cancel does not; and per
/// answer (``arms``), which overrides the kind's.
public struct CancelPageEffect: Sendable, Hashable {
    public var message = 0.05
    public var alternateProduct = 0.10
    public var promotionalOffer = 0.20
    /// Per answer (`--cancel-page-arm-effect`), keyed `message:<uuid lowercase>`,
    /// `product:<productId>` (an alternate product's target), `offer:<offerIdentifier>`;
    /// looked up offer, then product, then message, then the kind (``probability(_:catalog:)``).
    public var arms: [String: Double] = [:]

    public init() {}

    public func probability(_ shown: CancelPageShown) -> Double {
        switch shown {
        case .standard: 0
        case .message: message
        case .alternateProduct: alternateProduct
        case .promotionalOffer: promotionalOffer
        }
    }

    /// `message=0.05,alternate_product=0.10,promotional_offer=0.20` (kinds left out keep their
    /// default); nil for an unknown kind or a value that is not a probability.
    public static func parse(_ text: String) -> CancelPageEffect? {
        var e = CancelPageEffect()
        for item in text.split(separator: ",") {
            let kv = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard kv.count == 2, let p = Double(kv[1]), (0...1).contains(p) else { return nil }
            switch kv[0] {
            case "message": e.message = p
            case "alternate_product": e.alternateProduct = p
            case "promotional_offer": e.promotionalOffer = p
            default: return nil
            }
        }
        return e
    }
}

/// The performance test's configuration (Apple's `PerformanceTestConfig`).
public struct PerformanceTestSettings: Sendable, Hashable {
    public var maxConcurrentRequests = 10
    public var totalRequests = 200
    /// Requests not started this long (real ms) after the test began are not sent (failures, `OTHER`).
    public var totalDurationMs: Int64 = 60_000
    /// An answer later than this (real ms) is a failure (`TIMED_OUT`).
    public var responseTimeThresholdMs: Int64 = 700
    /// PASS at or above this success rate, in percent (Apple's field is an integer percentage).
    public var successRatePercent = 95

    public init() {}
}

/// The Retention Messaging API and the simulated customers' cancel page (docs/simulator.md,
/// "The cancel page (Retention Messaging)").
public struct RetentionOptions: Sendable {
    /// The Get Retention Message URL of every app in Production (`--retention-url`): set from the
    /// start, without a performance test.
    public var productionURL: String?
    /// The Sandbox URL (`--sandbox-retention-url`; default: ``productionURL``).
    public var sandboxURL: String?
    /// How long (simulated ms) an uploaded message or image stays PENDING.
    public var approvalDelayMs: Int64 = 0
    /// Messages whose header, body or bullet points contain one of these words (any case) are REJECTED.
    public var rejectWords: [String] = []
    /// Share of voluntary cancellations (auto-renew turned off) preceded by a cancel-page view.
    public var cancelPageShare = 0.5
    /// Views by customers who do not mean to cancel, per active subscriber per 30 days.
    public var browsePer30Days = 0.02
    /// How long (real ms) the App Store waits for an answer before showing the default message.
    public var timeoutMs: Int64 = 700
    public var effect = CancelPageEffect()
    /// Promotional offers' terms by offer identifier (`--cancel-page-offer`), for revenue per save
    /// (``revenuePerSave(key:shown:renewProduct:renewTier:catalog:)``); not listed: no discount.
    public var offers: [String: CancelPageOfferTerms] = [:]
    public var performanceTest = PerformanceTestSettings()
    /// Real-time requests of views in flight at once.
    public var concurrency = 16

    public init() {}

    /// The URL configured from the command line for an environment.
    public func url(sandbox: Bool) -> String? {
        sandbox ? (sandboxURL ?? productionURL) : productionURL
    }
}
