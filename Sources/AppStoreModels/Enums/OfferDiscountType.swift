/// The payment mode of an offer (`offerDiscountType`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum OfferDiscountType: String, Codable, Hashable, Sendable, CaseIterable {
    case freeTrial = "FREE_TRIAL"
    case payAsYouGo = "PAY_AS_YOU_GO"
    case payUpFront = "PAY_UP_FRONT"
    case oneTime = "ONE_TIME"
}
