/// Whether the subscription renews at the end of its period (`autoRenewStatus`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum AutoRenewStatus: Int32, Codable, Hashable, Sendable, CaseIterable {
    case off = 0
    case on = 1
}
