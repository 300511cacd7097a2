/// Whether the customer bought the product or has it through Family Sharing (`inAppOwnershipType`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum InAppOwnershipType: String, Codable, Hashable, Sendable, CaseIterable {
    case familyShared = "FAMILY_SHARED"
    case purchased = "PURCHASED"
}
