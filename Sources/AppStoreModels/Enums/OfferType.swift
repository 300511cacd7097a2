/// The kind of offer applied to a transaction or to the next renewal (`offerType`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum OfferType: Int32, Codable, Hashable, Sendable, CaseIterable {
    case introductoryOffer = 1
    case promotionalOffer = 2
    case offerCode = 3
    case winBackOffer = 4
}
