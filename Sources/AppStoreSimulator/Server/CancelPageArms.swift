import Foundation

/// A configuration text that does not parse: `reason` says why, in one line.
public struct CancelPageConfigError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// A promotional offer's terms (`--cancel-page-offer`): the share of the full price taken off,
/// for how many periods. An offer not listed has ``none``: no discount, one period.
public struct CancelPageOfferTerms: Sendable, Hashable {
    public var discount: Double
    public var periods: Int

    public init(discount: Double, periods: Int) {
        self.discount = discount
        self.periods = periods
    }

    public static let none = CancelPageOfferTerms(discount: 0, periods: 1)

    /// `SAVE50=0.5x1,SAVE20=0.2x3`: offer identifier = discount share (0 to 1) `x` periods (1 or more).
    public static func parse(_ text: String) throws(CancelPageConfigError) -> [String: CancelPageOfferTerms] {
        var out: [String: CancelPageOfferTerms] = [:]
        for (id, value) in try CancelPageEffect.items(text) {
            let parts = value.split(separator: "x", omittingEmptySubsequences: false)
            guard parts.count == 2, let d = Double(parts[0]), (0...1).contains(d), let n = Int(parts[1]), n >= 1 else {
                throw CancelPageConfigError(reason: "\(id)=\(value): wants OFFER=DISCOUNTxPERIODS, a discount from 0 to 1 and 1 or more periods")
            }
            guard out[id] == nil else { throw CancelPageConfigError(reason: "\(id): listed twice") }
            out[id] = CancelPageOfferTerms(discount: d, periods: n)
        }
        return out
    }
}

extension CancelPageEffect {
    /// The three kinds of answer, as keys of ``arms`` and of the potential outcomes.
    public static let kindKeys = [CancelPageShown.message, .alternateProduct, .promotionalOffer].map(\.rawValue)

    /// `message:<uuid>=P,product:<productId>=P,offer:<offerIdentifier>=P` (`--cancel-page-arm-effect`):
    /// per-answer probabilities, message identifiers lowercased. `productIds`, when given, are the
    /// product identifiers a `product:` key may name.
    public static func parseArms(_ text: String, productIds: Set<String>? = nil) throws(CancelPageConfigError) -> [String: Double] {
        var out: [String: Double] = [:]
        for (rawKey, value) in try items(text) {
            guard let p = Double(value), (0...1).contains(p) else {
                throw CancelPageConfigError(reason: "\(rawKey)=\(value): wants KEY=P with P from 0 to 1")
            }
            let colon = rawKey.firstIndex(of: ":") ?? rawKey.endIndex
            let prefix = rawKey[..<colon], id = rawKey[colon...].dropFirst()
            var key = rawKey
            switch prefix {
            case "message":
                guard let uuid = SimApp.uuid(String(id)) else { throw CancelPageConfigError(reason: "\(rawKey): not a message UUID") }
                key = "message:" + uuid
            case "product":
                guard !id.isEmpty, productIds?.contains(String(id)) ?? true else {
                    let known = (productIds ?? []).sorted().joined(separator: ", ")
                    throw CancelPageConfigError(reason: "\(rawKey): not a product of the catalog (\(known))")
                }
            case "offer":
                guard !id.isEmpty else { throw CancelPageConfigError(reason: "\(rawKey): no offer identifier") }
            default:
                throw CancelPageConfigError(reason: "\(rawKey): keys are message:<UUID>, product:<productId> or offer:<offerIdentifier>")
            }
            guard out[key] == nil else { throw CancelPageConfigError(reason: "\(rawKey): listed twice") }
            out[key] = p
        }
        return out
    }

    /// `KEY=VALUE` items of a comma-separated list, split at the last `=`, trimmed.
    static func items(_ text: String) throws(CancelPageConfigError) -> [(String, String)] {
        var out: [(String, String)] = []
        for item in text.split(separator: ",") {
            let trimmed = item.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { continue }
            guard let eq = trimmed.lastIndex(of: "=") else { throw CancelPageConfigError(reason: "\(trimmed): wants KEY=VALUE") }
            let key = trimmed[..<eq].trimmingCharacters(in: .whitespaces), value = trimmed[eq...].dropFirst().trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty else { throw CancelPageConfigError(reason: "\(trimmed): no key") }
            out.append((key, value))
        }
        return out
    }

    /// The keys a shown answer's probability is looked up by, first match wins: `offer:<id>`
    /// (a promotional offer), `product:<target>` (an alternate product), `message:<id>`; none for
    /// the default.
    static func lookupKeys(_ j: CancelPageJudgement, catalog: Catalog) -> [String] {
        var keys: [String] = []
        switch j.shown {
        case .standard: return []
        case .promotionalOffer: if let o = j.offerId { keys.append("offer:" + o) }
        case .alternateProduct: if let t = j.save?.switchTo { keys.append("product:" + catalog.products[t].id) }
        case .message: break
        }
        if let m = j.messageId { keys.append("message:" + m) }
        return keys
    }

    /// The most specific key of what was shown (`offer:`, `product:`, `message:`), `default` for the default.
    static func answerKey(_ j: CancelPageJudgement, catalog: Catalog) -> String {
        lookupKeys(j, catalog: catalog).first ?? (j.shown == .standard ? "default" : j.shown.rawValue)
    }

    /// The probability that a customer who came to cancel and is shown `j` stays: the first of
    /// ``lookupKeys(_:catalog:)`` in ``arms``, else the kind's; 0 for the default.
    func probability(_ j: CancelPageJudgement, catalog: Catalog) -> Double {
        guard j.shown != .standard else { return 0 }
        for k in Self.lookupKeys(j, catalog: catalog) { if let p = arms[k] { return p } }
        return probability(j.shown)
    }

    /// The probability of a key of the potential outcomes: an arm's, a kind's (nil: neither).
    func probability(key: String) -> Double? {
        if let p = arms[key] { return p }
        return CancelPageShown(rawValue: key).flatMap { $0 == .standard ? nil : probability($0) }
    }
}

extension RetentionOptions {
    /// Revenue per save: what the first renewal after the view brings when the answer keyed `key`
    /// saves the customer, in units of the full price of the renewal it would have had (the
    /// product it would renew into, at its price tier: `renewProduct`, `renewTier`). A message: 1.
    /// An alternate product `product:<id>`: the target's first price tier ÷ that price (the save
    /// renews into the target at its first tier). An offer `offer:<id>`: 1 − its discount
    /// (``offers``; 0 when not listed), times the price ratio when the offer is for another
    /// product of the group. Only the first renewal counts: an offer's further periods do not.
    /// For the shown answer's key and its kind, the answer shown (its target product, its offer);
    /// for other keys, an offer on the subscription's own product. The kind `alternate_product`
    /// names no product unless one was shown: nil. nil for a product not in the catalog.
    func revenuePerSave(
        key: String, shown j: CancelPageJudgement, renewProduct: Int, renewTier: Int, catalog: Catalog
    ) -> Double? {
        let shownKey = CancelPageEffect.answerKey(j, catalog: catalog)
        let isShown = key == shownKey || key == j.shown.rawValue
        let full = Double(catalog.price(product: renewProduct, tier: renewTier))
        func ratio(_ target: Int?) -> Double {
            guard let target, target != renewProduct, full > 0 else { return 1 }
            return Double(catalog.price(product: target, tier: 0)) / full
        }
        func offer(_ id: String?) -> Double { 1 - (id.flatMap { offers[$0] } ?? .none).discount }
        if key == CancelPageShown.message.rawValue || key.hasPrefix("message:") { return 1 }
        if key == CancelPageShown.alternateProduct.rawValue {
            return isShown && j.shown == .alternateProduct ? ratio(j.save?.switchTo) : nil
        }
        if key.hasPrefix("product:") {
            guard let target = catalog.index(of: String(key.dropFirst("product:".count))) else { return nil }
            return ratio(target)
        }
        if key == CancelPageShown.promotionalOffer.rawValue {
            return isShown && j.shown == .promotionalOffer ? offer(j.offerId) * ratio(j.save?.switchTo) : offer(nil)
        }
        if key.hasPrefix("offer:") {
            let id = String(key.dropFirst("offer:".count))
            return offer(id) * (isShown && j.offerId == id ? ratio(j.save?.switchTo) : 1)
        }
        return nil
    }
}
