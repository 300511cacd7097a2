import Foundation

/// The win-back campaigns of docs/contracts.md. Raw values are the contract written to
/// `churnwatch.winback_queue.campaign`.
public enum WinbackCampaign: String, Sendable, Codable, CaseIterable {
    /// `will_not_renew` (trials included) and `price_increase_pending`: now, until the period
    /// ends (WWDC 2018: save offers within the group, before the customer leaves).
    case saveOffer = "save_offer"
    /// `grace_period` and `billing_retry`: a day before grace ends; without grace, after 6 days
    /// of retry (WWDC 2018: message near the end of the first week of retry).
    case billingFix = "billing_fix"
    /// `churned_voluntary`, `churned_price_increase`, `churned_other`: after expiry, for 60
    /// days (the customer chose, or we can't tell).
    case winbackOffer = "winback_offer"
    /// `churned_billing`, `churned_product_unavailable`: after expiry, for 60 days (the
    /// customer didn't choose to leave).
    case resubscribePrompt = "resubscribe_prompt"

    /// The campaign for a segment; nil for segments without one (`refunded`: a decision to
    /// respect; `plan_change_pending`: a save already made; `active`, `unknown`).
    public init?(segment: Segment) {
        switch segment {
        case .willNotRenew, .priceIncreasePending: self = .saveOffer
        case .gracePeriod, .billingRetry: self = .billingFix
        case .churnedVoluntary, .churnedPriceIncrease, .churnedOther: self = .winbackOffer
        case .churnedBilling, .churnedProductUnavailable: self = .resubscribePrompt
        case .refunded, .planChangePending, .active, .unknown: return nil
        }
    }
}
