/// The customer's answer to a price increase (`priceIncreaseStatus`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum PriceIncreaseStatus: Int32, Codable, Hashable, Sendable, CaseIterable {
    case customerHasNotResponded = 0
    case customerConsentedOrWasNotifiedWithoutClaimingConsent = 1
}
