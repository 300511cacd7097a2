import AppStoreModels
import Foundation

/// What the App Store shows for one real-time answer.
struct CancelPageJudgement: Sendable, Hashable {
    var shown: CancelPageShown
    /// The message shown: the answer's, or for the default the one configured for the product
    /// and locale (nil when none is).
    var messageId: String?
    /// What a save does to the timeline (non-default answers only).
    var save: CancelPageSave?
    /// Why the default was shown: `no_url`, a `SendAttemptResult` (`timed_out`, `no_response`,
    /// ...), `http_status`, `late`, `invalid_body`, `not_approved`, `default_message`,
    /// `invalid_alternate_product`, `invalid_promotional_offer`; nil when the answer was shown.
    var defaultReason: String?

    /// The `offerIdentifier` of a promotional offer shown.
    var offerId: String? { save?.offerId }
}

extension SimApp {
    /// The App Store's reading of an answer to a view of subscription `i` on `product` at `t`:
    /// shown when a 200 in time carries a valid `RealtimeResponseBody` whose message is APPROVED
    /// for this app (with its images); an `alternateProduct` must name another product of the
    /// subscription's group, a `promotionalOffer` a `promotionalOfferSignatureV2` whose claims
    /// name this app's bundle id, a product of the group and an offer identifier (decoded, not
    /// verified). A plain `message` that is configured as a default message is the default.
    /// Anything else shows the default message. `answer` nil: nothing was posted.
    func judge(_ answer: RealtimeHTTP.Answer?, product: Int, locale: String, at t: Int64) -> CancelPageJudgement {
        let productId = population.catalog.products[product].id
        func standard(_ reason: String, _ id: String? = nil) -> CancelPageJudgement {
            CancelPageJudgement(
                shown: .standard, messageId: id ?? messaging.defaultMessage(productId: productId, locale: locale), save: nil,
                defaultReason: reason)
        }
        guard let answer else { return standard("no_url") }
        if let failure = answer.failure { return standard(failure.lowercased()) }
        guard answer.status == 200 else { return standard("http_status") }
        guard answer.latencyMs <= options.retention.timeoutMs else { return standard("late") }
        guard let body = RealtimeHTTP.validBody(answer.body), let raw = body.messageIdentifier else { return standard("invalid_body") }
        guard let id = Self.uuid(raw), messaging.isShowable(id, at: t) else { return standard("not_approved") }
        if body.message != nil {
            guard !messaging.isDefaultMessage(id) else { return standard("default_message", id) }
            return CancelPageJudgement(shown: .message, messageId: id, save: CancelPageSave(switchTo: nil, promotional: false))
        }
        if let alternate = body.alternateProduct {
            guard let target = sameGroup(alternate.productId, as: product), target != product else {
                return standard("invalid_alternate_product")
            }
            return CancelPageJudgement(shown: .alternateProduct, messageId: id, save: CancelPageSave(switchTo: target, promotional: false))
        }
        guard let jws = body.promotionalOffer?.promotionalOfferSignatureV2,
              let claims = try? CompactJWS(jws).decodePayload(RetentionWire.PromotionalOfferClaims.self),
              claims.bid == bundleId, let target = claims.productId.flatMap({ sameGroup($0, as: product) }),
              claims.offerIdentifier?.isEmpty == false
        else { return standard("invalid_promotional_offer") }
        return CancelPageJudgement(
            shown: .promotionalOffer, messageId: id,
            save: CancelPageSave(switchTo: target == product ? nil : target, promotional: true, offerId: claims.offerIdentifier))
    }

    /// The index of `productId` when it is a product of `product`'s subscription group.
    private func sameGroup(_ productId: String, as product: Int) -> Int? {
        let catalog = population.catalog
        guard let k = catalog.index(of: productId), catalog.products[k].group == catalog.products[product].group else { return nil }
        return k
    }
}
