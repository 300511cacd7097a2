/// How a transaction was revoked (`revocationType`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum RevocationType: String, Codable, Hashable, Sendable, CaseIterable {
    case refundFull = "REFUND_FULL"
    case refundProrated = "REFUND_PRORATED"
    case familyRevoke = "FAMILY_REVOKE"
}
