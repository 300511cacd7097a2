/// Why a subscription expired (`expirationIntent`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum ExpirationIntent: Int32, Codable, Hashable, Sendable, CaseIterable {
    case customerCancelled = 1
    case billingError = 2
    case customerDidNotConsentToPriceIncrease = 3
    case productNotAvailable = 4
    case other = 5
}
