/// How a subscription is billed (`billingPlanType`, `renewalBillingPlanType`; API 1.21).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum BillingPlanType: String, Codable, Hashable, Sendable, CaseIterable {
    case billedUpfront = "BILLED_UPFRONT"
    case monthly = "MONTHLY"
}
