/// Why Apple refunded or revoked a transaction (`revocationReason`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum RevocationReason: Int32, Codable, Hashable, Sendable, CaseIterable {
    case otherReason = 0
    case actualOrPerceivedIssue = 1
}
