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

/// Whether a cancel-page rule is for a first visit or a repeated one, by the views recorded
/// before the request (`subscription_segments.last_cancel_page_view_at`). Written as `any`,
/// `never` or `within:N` (days) in `retention_rules.viewed_before` and `--viewed-before`.
public enum ViewedBefore: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Every request (the default).
    case any
    /// No view recorded before: a first visit.
    case never
    /// A view recorded within the last `days` days before the request: a repeated visit.
    case within(days: Int)

    public init?(_ text: String) {
        switch text {
        case "any": self = .any
        case "never": self = .never
        default:
            guard text.hasPrefix("within:"), let days = Int(text.dropFirst("within:".count)), (1...9999).contains(days) else { return nil }
            self = .within(days: days)
        }
    }

    public var description: String {
        switch self {
        case .any: "any"
        case .never: "never"
        case .within(let days): "within:\(days)"
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let value = ViewedBefore(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not any, never or within:N: \(text)"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    /// Whether a request at `now` with the last view recorded before it at `lastView` (nil:
    /// none; `known` false: the database did not answer in time) passes.
    func admits(lastView: Date?, known: Bool, now: Date) -> Bool {
        switch self {
        case .any: return true
        case .never: return known && lastView == nil
        case .within(let days):
            guard known, let lastView else { return false }
            return now.timeIntervalSince(lastView) <= Double(days) * 86_400
        }
    }
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
    /// A first visit, a repeated one, or any (the default).
    public var viewedBefore: ViewedBefore
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
                viewedBefore: ViewedBefore = .any, kind: RetentionAnswerKind, messageId: String, alternateProductId: String? = nil, billingPlanType: String? = nil,
                offerId: String? = nil, holdout: Double = 0) {
        (self.name, self.priority, self.productId, self.subscriptionGroupId) = (name, priority, productId, subscriptionGroupId)
        (self.segments, self.minTenureDays, self.maxTenureDays, self.locales) = (segments, minTenureDays, maxTenureDays, locales)
        (self.kind, self.messageId, self.alternateProductId, self.billingPlanType) = (kind, messageId, alternateProductId, billingPlanType)
        (self.offerId, self.holdout, self.viewedBefore) = (offerId, holdout, viewedBefore)
    }

    enum CodingKeys: String, CodingKey {
        case name, priority, productId, subscriptionGroupId, segments, minTenureDays, maxTenureDays, locales, viewedBefore, kind, messageId
        case alternateProductId, billingPlanType, offerId, holdout
    }

    /// A rule written before `viewedBefore` existed reads as `any`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(name: try c.decode(String.self, forKey: .name), priority: try c.decode(Int.self, forKey: .priority),
                  productId: try c.decodeIfPresent(String.self, forKey: .productId),
                  subscriptionGroupId: try c.decodeIfPresent(String.self, forKey: .subscriptionGroupId),
                  segments: try c.decode([Segment].self, forKey: .segments),
                  minTenureDays: try c.decodeIfPresent(Int.self, forKey: .minTenureDays), maxTenureDays: try c.decodeIfPresent(Int.self, forKey: .maxTenureDays),
                  locales: try c.decode([String].self, forKey: .locales),
                  viewedBefore: try c.decodeIfPresent(ViewedBefore.self, forKey: .viewedBefore) ?? .any,
                  kind: try c.decode(RetentionAnswerKind.self, forKey: .kind), messageId: try c.decode(String.self, forKey: .messageId),
                  alternateProductId: try c.decodeIfPresent(String.self, forKey: .alternateProductId),
                  billingPlanType: try c.decodeIfPresent(String.self, forKey: .billingPlanType),
                  offerId: try c.decodeIfPresent(String.self, forKey: .offerId), holdout: try c.decode(Double.self, forKey: .holdout))
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
        return viewedBefore.admits(lastView: facts.lastView, known: facts.viewsKnown, now: facts.requestedAt)
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
    /// The request's moment (its signedDate).
    public var requestedAt: Date
    /// The last cancel-page view recorded before this request (nil: none), when `viewsKnown`.
    public var lastView: Date?
    /// Whether the database answered with the views (false: a rule on them does not match).
    public var viewsKnown: Bool

    public init(productId: String, userLocale: String, subscriptionGroupId: String? = nil, segment: Segment? = nil, tenureDays: Int? = nil,
                requestedAt: Date = Date(timeIntervalSince1970: 0), lastView: Date? = nil, viewsKnown: Bool = false) {
        (self.productId, self.userLocale, self.subscriptionGroupId, self.segment, self.tenureDays) =
            (productId, userLocale, subscriptionGroupId, segment, tenureDays)
        (self.requestedAt, self.lastView, self.viewsKnown) = (requestedAt, lastView, viewsKnown)
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
