import Foundation
import Testing
@testable import ChurnModel

@Suite("RetentionChoice: the cancel page's rules")
struct RetentionChoiceTests {
    static let (m0, m1, m2, m3) = ("00000000-0000-4000-8000-000000000000", "11111111-1111-4111-8111-111111111111",
                                   "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333")
    static let rules = [
        RetentionRule(name: "everyone", priority: 100, kind: .message, messageId: m3),
        RetentionRule(name: "save", priority: 10, segments: [.willNotRenew], kind: .promotionalOffer, messageId: m1, offerId: "o", holdout: 0.25),
        RetentionRule(name: "french-loyal", priority: 10, minTenureDays: 365, locales: ["fr"], kind: .alternateProduct, messageId: m2,
                      alternateProductId: "yearly"),
    ]
    static let defaults = [RetentionDefault(productId: nil, locale: nil, messageId: m0),
                           RetentionDefault(productId: "monthly", locale: "fr-FR", messageId: m2)]

    @Test("the first matching rule by priority then name; the holdout below the rule's share; facts the database did not give match no rule that needs them")
    func firstMatchWins() {
        let risky = RetentionFacts(productId: "monthly", userLocale: "fr_FR", segment: .willNotRenew, tenureDays: 400)
        // "french-loyal" and "save" share priority 10: the name decides.
        #expect(RetentionChoice.choose(rules: Self.rules, defaults: Self.defaults, facts: risky, draw: 0.9).rule?.name == "french-loyal")
        let english = RetentionFacts(productId: "monthly", userLocale: "en-US", segment: .willNotRenew, tenureDays: 400)
        let treated = RetentionChoice.choose(rules: Self.rules, defaults: Self.defaults, facts: english, draw: 0.25)
        #expect(treated.arm == .treated && treated.rule?.name == "save")
        let held = RetentionChoice.choose(rules: Self.rules, defaults: Self.defaults, facts: english, draw: 0.2499)
        #expect(held.arm == .holdout && held.rule?.name == "save" && held.defaultMessageId == Self.m0)
        let unknown = RetentionFacts(productId: "monthly", userLocale: "en-US")
        #expect(RetentionChoice.choose(rules: Self.rules, defaults: Self.defaults, facts: unknown, draw: 0.9).rule?.name == "everyone")
        let none = RetentionChoice.choose(rules: [Self.rules[1]], defaults: [], facts: unknown, draw: 0.9)
        #expect(none.arm == .noRule && none.rule == nil && none.defaultMessageId == nil)
    }

    @Test("the most specific default: product and locale before product, language and the one for everything; locales match without case, - and _ alike, a language covers its locales")
    func defaults() {
        #expect(RetentionChoice.defaultMessage(Self.defaults, RetentionFacts(productId: "monthly", userLocale: "FR-fr")) == Self.m2)
        #expect(RetentionChoice.defaultMessage(Self.defaults, RetentionFacts(productId: "yearly", userLocale: "fr-FR")) == Self.m0)
        #expect(RetentionChoice.defaultMessage(Self.defaults, RetentionFacts(productId: "monthly", userLocale: "fr-CA")) == Self.m0)
        #expect(RetentionFacts.locale("en", covers: "en_GB") && !RetentionFacts.locale("en-US", covers: "en-GB"))
        #expect(!RetentionFacts.locale("e", covers: "en-GB"))
    }

    @Test("a rule's problems are named in one line: its kind's fields, its message, its holdout, its tenure bounds")
    func problems() {
        #expect(Self.rules.allSatisfy { $0.problem == nil })
        #expect(RetentionRule(name: "x", kind: .promotionalOffer, messageId: Self.m1).problem?.contains("--offer-id") == true)
        #expect(RetentionRule(name: "x", kind: .alternateProduct, messageId: Self.m1).problem?.contains("--alternate-product") == true)
        #expect(RetentionRule(name: "x", kind: .message, messageId: "not-a-uuid").problem?.contains("UUID") == true)
        #expect(RetentionRule(name: "x", kind: .message, messageId: Self.m1, holdout: 1).problem?.contains("holdout") == true)
        #expect(RetentionRule(name: "x", minTenureDays: 9, maxTenureDays: 3, kind: .message, messageId: Self.m1).problem != nil)
    }
}
