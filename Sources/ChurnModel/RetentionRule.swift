import Foundation

/// What a cancel-page rule answers (docs/contracts.md "The cancel page"). Raw values are the
/// contract written to `churnwatch.retention_rules.kind` and `retention_message_requests.answer_kind`.
public enum RetentionAnswerKind: String, Sendable, Codable, CaseIterable {
    /// A message (header, body, bullet points, image) the App Store shows.
    case message
    /// A message suggesting another product of the group (a switch-plan suggestion).
    case alternateProduct = "alternate_product"
    /// A message with a promotional offer, signed at answer time.
    case promotionalOffer = "promotional_offer"
}

/// One rule of the cancel page: who it is for and what they are shown. Rules are data
/// (`churnwatch messages rules set`), tried in `priority` order (then name); the first that
/// matches answers. Conditions left nil or empty match anything.
public struct RetentionRule: Sendable, Equatable, Codable {
    public var name: String
    public var priority: Int
    /// The product the customer is on (the request's `productId`).
    public var productId: String?
    /// The product's subscription group (from the stored subscription).
    public var subscriptionGroupId: String?
    /// The subscription's churn-risk segment.
    public var segments: [Segment]
    /// Days since the original purchase, inclusive bounds.
    public var minTenureDays: Int?
    public var maxTenureDays: Int?
    /// Locales as Apple writes them (`en-US`), or a language alone (`en`), matched without case
    /// and with `-` and `_` alike.
    public var locales: [String]
    public var kind: RetentionAnswerKind
    /// The message shown (an `APPROVED` message's identifier, a UUID).
    public var messageId: String
    /// `alternate_product`: the product suggested, and optionally its billing plan type.
    public var alternateProductId: String?
    public var billingPlanType: String?
    /// `promotional_offer`: the offer's identifier (signed for the request's product).
    public var offerId: String?
    /// The share of subscribers held out (shown the default message), drawn once per
    /// subscriber (`RetentionDraw`).
    public var holdout: Double

    public init(name: String, priority: Int = 100, productId: String? = nil, subscriptionGroupId: String? = nil,
                segments: [Segment] = [], minTenureDays: Int? = nil, maxTenureDays: Int? = nil, locales: [String] = [],
                kind: RetentionAnswerKind, messageId: String, alternateProductId: String? = nil, billingPlanType: String? = nil,
                offerId: String? = nil, holdout: Double = 0) {
        (self.name, self.priority, self.productId, self.subscriptionGroupId) = (name, priority, productId, subscriptionGroupId)
        (self.segments, self.minTenureDays, self.maxTenureDays, self.locales) = (segments, minTenureDays, maxTenureDays, locales)
        (self.kind, self.messageId, self.alternateProductId, self.billingPlanType) = (kind, messageId, alternateProductId, billingPlanType)
        (self.offerId, self.holdout) = (offerId, holdout)
    }

    /// The one line saying what is wrong with this rule; nil when it can be used.
    public var problem: String? {
        if name.isEmpty || name.count > 100 { return "a rule's name is 1 to 100 characters" }
        if UUID(uuidString: messageId) == nil { return "--message \(messageId) is not a message identifier (a UUID)" }
        if !(0..<1).contains(holdout) { return "--holdout \(holdout) is not a share from 0 to below 1" }
        if let lo = minTenureDays, let hi = maxTenureDays, lo > hi { return "--min-tenure-days \(lo) is above --max-tenure-days \(hi)" }
        if (minTenureDays ?? 0) < 0 || (maxTenureDays ?? 0) < 0 { return "tenure bounds are days, 0 or more" }
        switch kind {
        case .message:
            if alternateProductId != nil || offerId != nil { return "a message rule takes neither --alternate-product nor --offer-id" }
        case .alternateProduct:
            if alternateProductId?.isEmpty ?? true { return "an alternate_product rule needs --alternate-product" }
            if offerId != nil { return "an alternate_product rule takes no --offer-id" }
        case .promotionalOffer:
            if offerId?.isEmpty ?? true { return "a promotional_offer rule needs --offer-id" }
            if alternateProductId != nil { return "a promotional_offer rule takes no --alternate-product" }
        }
        return nil
    }

    /// Whether the rule is for this request. A condition on what only the database knows
    /// (group, segment, tenure) does not match when that is unknown (the database down).
    public func matches(_ facts: RetentionFacts) -> Bool {
        if let productId, productId != facts.productId { return false }
        if let subscriptionGroupId, subscriptionGroupId != facts.subscriptionGroupId { return false }
        if !segments.isEmpty { guard let s = facts.segment, segments.contains(s) else { return false } }
        if minTenureDays != nil || maxTenureDays != nil {
            guard let days = facts.tenureDays else { return false }
            if let lo = minTenureDays, days < lo { return false }
            if let hi = maxTenureDays, days > hi { return false }
        }
        if !locales.isEmpty, !locales.contains(where: { RetentionFacts.locale($0, covers: facts.userLocale) }) { return false }
        return true
    }
}

/// What is known of the customer on the cancel page: the request's product and locale, and what
/// the database says (nil when it did not answer in time).
public struct RetentionFacts: Sendable, Equatable {
    public var productId: String
    public var userLocale: String
    public var subscriptionGroupId: String?
    public var segment: Segment?
    public var tenureDays: Int?

    public init(productId: String, userLocale: String, subscriptionGroupId: String? = nil, segment: Segment? = nil, tenureDays: Int? = nil) {
        (self.productId, self.userLocale, self.subscriptionGroupId, self.segment, self.tenureDays) =
            (productId, userLocale, subscriptionGroupId, segment, tenureDays)
    }

    /// `en-US`, `en_us` → `en_us`.
    public static func normalized(_ locale: String) -> String {
        locale.lowercased().replacingOccurrences(of: "-", with: "_")
    }

    /// Whether `pattern` (a locale, or a language alone) covers `locale`.
    public static func locale(_ pattern: String, covers locale: String) -> Bool {
        let p = normalized(pattern), l = normalized(locale)
        return p == l || (!p.contains("_") && l.hasPrefix(p + "_"))
    }
}

/// The default message for a product and locale: what Apple shows when the answer fails, and
/// what churnwatch answers explicitly to the holdout and when no rule matches. `productId` or
/// `locale` nil: every product, every locale (churnwatch's own fallback).
public struct RetentionDefault: Sendable, Equatable, Codable {
    public var productId: String?
    public var locale: String?
    public var messageId: String

    public init(productId: String?, locale: String?, messageId: String) {
        (self.productId, self.locale, self.messageId) = (productId, locale, messageId)
    }
}
