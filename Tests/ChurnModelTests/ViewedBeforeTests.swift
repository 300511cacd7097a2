import Foundation
import Testing
@testable import ChurnModel

@Suite("cancel-page rules on a first or a repeated visit")
struct ViewedBeforeTests {
    static let m = "11111111-1111-4111-8111-111111111111"
    static let now = Date(timeIntervalSince1970: 1_795_255_200)

    @Test("written any, never or within:N (1 to 9999 days); anything else is refused; encoded as written")
    func parsing() throws {
        #expect(ViewedBefore("any") == .any && ViewedBefore("never") == .never && ViewedBefore("within:7") == .within(days: 7))
        for bad in ["", "Never", "within:", "within:0", "within:-1", "within:7d", "within:10000", "7"] {
            #expect(ViewedBefore(bad) == nil, "\(bad)")
        }
        let rule = RetentionRule(name: "second-visit", viewedBefore: .within(days: 30), kind: .message, messageId: Self.m)
        let json = String(decoding: try JSONEncoder().encode(rule), as: UTF8.self)
        #expect(json.contains(#""viewedBefore":"within:30""#), "\(json)")
        #expect(try JSONDecoder().decode(RetentionRule.self, from: Data(json.utf8)) == rule)
        // A rule written before the condition existed reads as any.
        let old = #"{"name":"x","priority":1,"segments":[],"locales":[],"kind":"message","messageId":"\#(Self.m)","holdout":0}"#
        #expect(try JSONDecoder().decode(RetentionRule.self, from: Data(old.utf8)).viewedBefore == .any)
    }

    @Test("never: no view recorded; within:N: a view at most N days before the request; a rule on views does not match when the database did not answer")
    func matching() {
        let first = RetentionRule(name: "first", viewedBefore: .never, kind: .message, messageId: Self.m)
        let again = RetentionRule(name: "again", viewedBefore: .within(days: 7), kind: .message, messageId: Self.m)
        let anyone = RetentionRule(name: "anyone", kind: .message, messageId: Self.m)
        func facts(_ last: Date?, known: Bool = true) -> RetentionFacts {
            RetentionFacts(productId: "monthly", userLocale: "en-US", requestedAt: Self.now, lastView: last, viewsKnown: known)
        }
        let day: TimeInterval = 86_400
        #expect(first.matches(facts(nil)) && !again.matches(facts(nil)))
        #expect(!first.matches(facts(Self.now - 3 * day)) && again.matches(facts(Self.now - 3 * day)))
        #expect(again.matches(facts(Self.now - 7 * day)) && !again.matches(facts(Self.now - 7 * day - 1)))
        #expect(!first.matches(facts(nil, known: false)) && !again.matches(facts(Self.now, known: false)))
        #expect(anyone.matches(facts(nil, known: false)) && anyone.matches(facts(Self.now - 400 * day)))
        // The first match by priority: a repeated visit gets the second-visit answer.
        let rules = [RetentionRule(name: "again", priority: 1, viewedBefore: .within(days: 7), kind: .message, messageId: Self.m), anyone]
        #expect(RetentionChoice.choose(rules: rules, defaults: [], facts: facts(Self.now - day), draw: 0.5).rule?.name == "again")
        #expect(RetentionChoice.choose(rules: rules, defaults: [], facts: facts(nil), draw: 0.5).rule?.name == "anyone")
    }
}
