import Foundation
import Testing
@testable import ChurnModel

@Suite("ChangeDetector")
struct ChangeDetectorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let before: Apple
        let beforeAt: Date
        let after: Apple
        let afterAt: Date
        let events: [ChurnEventType]
        var testDescription: String { name }
    }

    static let pendingDowngrade = Apple().with { $0.renewal?.autoRenewProductId = "lite.monthly" }
    static let priceIncreasePending = Apple().with { $0.renewal?.priceIncreaseStatus = 0 }

    @Test("one row per rule", arguments: [
        // Every event type.
        Case(name: "auto_renew_disabled", before: Apple(), beforeAt: day(1), after: Apple().autoRenew(false), afterAt: day(2),
             events: [.autoRenewDisabled]),
        Case(name: "auto_renew_enabled", before: Apple().autoRenew(false), beforeAt: day(2), after: Apple(), afterAt: day(3),
             events: [.autoRenewEnabled]),
        Case(name: "billing_retry_started", before: Apple(), beforeAt: day(29), after: Apple().billingFailed(), afterAt: day(31),
             events: [.billingRetryStarted]),
        Case(name: "grace_period_started", before: Apple(), beforeAt: day(29), after: Apple().billingFailed(grace: day(36)),
             afterAt: day(31), events: [.gracePeriodStarted]),
        Case(name: "grace_period_expired", before: Apple().billingFailed(grace: day(36)), beforeAt: day(31),
             after: Apple().billingFailed(grace: day(36)).with { $0.status = 3 }, afterAt: day(37), events: [.gracePeriodExpired]),
        Case(name: "billing_recovered", before: Apple().billingFailed(), beforeAt: day(31),
             after: Apple().newPeriod(2, at: day(33)), afterAt: day(34), events: [.billingRecovered]),
        Case(name: "renewed", before: Apple(), beforeAt: day(29), after: Apple().newPeriod(2, at: day(30)), afterAt: day(31),
             events: [.renewed]),
        Case(name: "expired", before: Apple().autoRenew(false), beforeAt: day(29), after: Apple().expired(intent: 1),
             afterAt: day(31), events: [.expired]),
        Case(name: "refunded (auto-renew off with it is not auto_renew_disabled)", before: Apple(), beforeAt: day(1),
             after: Apple().revoked(at: day(5)), afterAt: day(6), events: [.refunded]),
        Case(name: "refund_reversed", before: Apple().revoked(at: day(5)), beforeAt: day(6), after: Apple().autoRenew(false),
             afterAt: day(8), events: [.refundReversed]),
        Case(name: "plan_change_scheduled", before: Apple(), beforeAt: day(1), after: ChangeDetectorTests.pendingDowngrade, afterAt: day(2),
             events: [.planChangeScheduled]),
        Case(name: "plan_change_cancelled", before: ChangeDetectorTests.pendingDowngrade, beforeAt: day(2), after: Apple(), afterAt: day(3),
             events: [.planChangeCancelled]),
        Case(name: "plan_changed: immediate upgrade, not a renewal", before: Apple(), beforeAt: day(1),
             after: Apple().newPeriod(2, at: day(10), product: "premium.monthly", reason: "PURCHASE"), afterAt: day(11),
             events: [.planChanged]),
        Case(name: "plan_changed: scheduled downgrade takes effect at renewal", before: ChangeDetectorTests.pendingDowngrade, beforeAt: day(29),
             after: ChangeDetectorTests.pendingDowngrade.newPeriod(2, at: day(30), product: "lite.monthly"), afterAt: day(31),
             events: [.renewed, .planChanged]),
        Case(name: "price_increase_pending", before: Apple(), beforeAt: day(1), after: ChangeDetectorTests.priceIncreasePending, afterAt: day(2),
             events: [.priceIncreasePending]),
        Case(name: "price_increase_accepted", before: ChangeDetectorTests.priceIncreasePending, beforeAt: day(2),
             after: Apple().with { $0.renewal?.priceIncreaseStatus = 1 }, afterAt: day(3), events: [.priceIncreaseAccepted]),
        Case(name: "price_increase_accepted: renewed at the new price", before: ChangeDetectorTests.priceIncreasePending, beforeAt: day(29),
             after: ChangeDetectorTests.priceIncreasePending.newPeriod(2, at: day(30)), afterAt: day(31), events: [.renewed, .priceIncreaseAccepted]),
        Case(name: "an upgrade while a price increase awaits consent ends it without consent", before: ChangeDetectorTests.priceIncreasePending,
             beforeAt: day(9), after: ChangeDetectorTests.priceIncreasePending.newPeriod(2, at: day(10), product: "premium.monthly", reason: "PURCHASE"),
             afterAt: day(11), events: [.planChanged]),
        Case(name: "resubscribed", before: Apple().expired(intent: 1), beforeAt: day(31),
             after: Apple().newPeriod(2, at: day(40), reason: "PURCHASE"), afterAt: day(41), events: [.resubscribed]),

        // What is not auto_renew_disabled.
        Case(name: "expiry (product gone) is not auto_renew_disabled", before: Apple(), beforeAt: day(29),
             after: Apple().expired(intent: 4), afterAt: day(31), events: [.expired]),
        Case(name: "billing failure is not auto_renew_disabled", before: Apple(), beforeAt: day(29),
             after: Apple().billingFailed().autoRenew(false), afterAt: day(31), events: [.billingRetryStarted]),
        Case(name: "cancel during grace is an expiry, not grace_period_expired", before: Apple().billingFailed(grace: day(36)),
             beforeAt: day(31), after: Apple().expired(intent: 1).with { $0.renewal = nil }, afterAt: day(33), events: [.expired]),

        // Several things between two polls.
        Case(name: "renewed and auto-renew turned off", before: Apple(), beforeAt: day(29),
             after: Apple().newPeriod(2, at: day(30)).autoRenew(false), afterAt: day(31), events: [.renewed, .autoRenewDisabled]),
        Case(name: "auto-renew back on and renewed", before: Apple().autoRenew(false), beforeAt: day(29),
             after: Apple().newPeriod(2, at: day(30)), afterAt: day(31), events: [.renewed, .autoRenewEnabled]),
        Case(name: "grace began and ended", before: Apple(), beforeAt: day(29),
             after: Apple().billingFailed(grace: day(33)).with { $0.status = 3 }, afterAt: day(35),
             events: [.gracePeriodStarted, .gracePeriodExpired]),
        Case(name: "recovered, then the next renewal failed", before: Apple().billingFailed(), beforeAt: day(31),
             after: Apple().newPeriod(2, at: day(33)).billingFailed(), afterAt: day(64), events: [.billingRecovered, .billingRetryStarted]),
        Case(name: "retry ran out (intent 2)", before: Apple().billingFailed(), beforeAt: day(89),
             after: Apple().expired(intent: 2), afterAt: day(91), events: [.expired]),
        Case(name: "lapse and purchase between polls is a resubscribe", before: Apple(), beforeAt: day(29),
             after: Apple().newPeriod(2, at: day(45), reason: "PURCHASE"), afterAt: day(46), events: [.resubscribed]),
        Case(name: "lapse and renewal between polls is a recovery", before: Apple(), beforeAt: day(29),
             after: Apple().newPeriod(2, at: day(34)), afterAt: day(35), events: [.billingRecovered]),
        Case(name: "resubscribed and expired again", before: Apple().expired(intent: 1), beforeAt: day(31),
             after: Apple().newPeriod(2, at: day(40), days: 7, reason: "PURCHASE").expired(intent: 1), afterAt: day(50),
             events: [.resubscribed, .expired]),

        Case(name: "purchase of another product long after the end could be an upgrade after missed renewals",
             before: Apple(), beforeAt: day(29), after: Apple().newPeriod(5, at: day(95), product: "premium.monthly", reason: "PURCHASE"),
             afterAt: day(96), events: [.planChanged]),
        Case(name: "legacy renewal after a gap, no transactionReason: no guess", before: Apple(), beforeAt: day(29),
             after: Apple().newPeriod(2, at: day(34)).with { $0.transaction.transactionReason = nil }, afterAt: day(35), events: [.renewed]),
        Case(name: "renewed, then the new period refunded", before: Apple(), beforeAt: day(29),
             after: Apple().newPeriod(2, at: day(30)).revoked(at: day(31)), afterAt: day(32), events: [.renewed, .refunded]),
        Case(name: "refund reversed after the period ended", before: Apple().revoked(at: day(5)), beforeAt: day(6),
             after: Apple().expired(intent: 1), afterAt: day(31), events: [.expired, .refundReversed]),
        Case(name: "pending change switched to another product", before: ChangeDetectorTests.pendingDowngrade, beforeAt: day(2),
             after: Apple().with { $0.renewal?.autoRenewProductId = "pro.yearly" }, afterAt: day(3), events: [.planChangeScheduled]),

        // Nothing changed.
        Case(name: "same facts, signed later", before: Apple(), beforeAt: day(1), after: Apple(), afterAt: day(2), events: []),
    ])
    func rule(_ c: Case) {
        let result = ChangeDetector.events(previous: c.before.snapshot(at: c.beforeAt), current: c.after.snapshot(at: c.afterAt), asOf: c.afterAt)
        #expect(result.events.map(\.type) == c.events)
        #expect(!result.stale && !result.isBaseline)
        #expect(result.events.allSatisfy { $0.occurredAt <= c.afterAt })
    }

    struct BaselineCase: Sendable, CustomTestStringConvertible {
        let name: String
        let apple: Apple
        var testDescription: String { name }
    }

    @Test("the first snapshot is a baseline: no events, whatever the state", arguments: [
        BaselineCase(name: "active", apple: Apple()),
        BaselineCase(name: "will not renew", apple: Apple().autoRenew(false)),
        BaselineCase(name: "grace period", apple: Apple().billingFailed(grace: day(36))),
        BaselineCase(name: "expired", apple: Apple().expired(intent: 1)),
        BaselineCase(name: "refunded", apple: Apple().revoked(at: day(2))),
    ])
    func baseline(_ c: BaselineCase) {
        let result = ChangeDetector.events(previous: nil, current: c.apple.snapshot(at: day(31)), asOf: day(31))
        #expect(result.isBaseline)
        #expect(result.events.isEmpty)
    }

    @Test("a snapshot older than the stored one is stale: no events, not stored")
    func stale() {
        let stored = Apple().autoRenew(false).snapshot(at: day(10))
        let late = Apple().with { $0.signedAt = day(9) }.snapshot(at: day(11))
        let result = ChangeDetector.events(previous: stored, current: late, asOf: day(11))
        #expect(result.stale)
        #expect(!result.shouldStore)
        #expect(result.events.isEmpty)
    }

    @Test("an unknown status invents no event and is flagged")
    func unknownStatus() {
        let known = Apple().snapshot(at: day(29))
        let unknown = Apple().expired(intent: 1).with { $0.status = 7 }.snapshot(at: day(31))
        let toUnknown = ChangeDetector.events(previous: known, current: unknown, asOf: day(31))
        #expect(toUnknown.events.isEmpty)
        #expect(toUnknown.unknownValues == [UnknownValue(field: "status", raw: "7")])
        let fromUnknown = ChangeDetector.events(previous: unknown, current: Apple().expired(intent: 1).snapshot(at: day(32)), asOf: day(32))
        #expect(fromUnknown.events.isEmpty)
    }

    @Test("another subscription's snapshot is no previous state")
    func otherSubscription() {
        let other = Apple().with { $0.transaction.originalTransactionId = "2000" }.snapshot(at: day(1))
        let result = ChangeDetector.events(previous: other, current: Apple().autoRenew(false).snapshot(at: day(2)), asOf: day(2))
        #expect(result.isBaseline)
        #expect(result.events.isEmpty)
    }

    struct TimeCase: Sendable, CustomTestStringConvertible {
        let name: String
        let before: SubscriptionSnapshot
        let after: SubscriptionSnapshot
        let asOf: Date
        let type: ChurnEventType
        let occurredAt: Date
        let basis: String
        var testDescription: String { name }
    }

    @Test("occurred_at is the best time known", arguments: [
        TimeCase(name: "renewal: purchaseDate", before: snap(at: day(29)), after: Apple().newPeriod(2, at: day(30)).snapshot(at: day(31)),
                 asOf: day(31), type: .renewed, occurredAt: day(30), basis: "purchaseDate"),
        TimeCase(name: "refund: revocationDate", before: snap(at: day(1)), after: Apple().revoked(at: day(4)).snapshot(at: day(6)),
                 asOf: day(6), type: .refunded, occurredAt: day(4), basis: "revocationDate"),
        TimeCase(name: "expiry from active: expiresDate", before: snap(at: day(29)), after: Apple().expired(intent: 1).snapshot(at: day(31)),
                 asOf: day(31), type: .expired, occurredAt: day(30), basis: "expiresDate"),
        TimeCase(name: "retry start: the failed renewal", before: snap(at: day(29)), after: Apple().billingFailed().snapshot(at: day(32)),
                 asOf: day(32), type: .billingRetryStarted, occurredAt: day(30), basis: "expiresDate"),
        TimeCase(name: "grace end: gracePeriodExpiresDate", before: Apple().billingFailed(grace: day(36)).snapshot(at: day(31)),
                 after: Apple().billingFailed(grace: day(36)).with { $0.status = 3 }.snapshot(at: day(38)),
                 asOf: day(38), type: .gracePeriodExpired, occurredAt: day(36), basis: "gracePeriodExpiresDate"),
        TimeCase(name: "auto-renew flip: detection time", before: snap(at: day(1)), after: Apple().autoRenew(false).snapshot(at: day(2)),
                 asOf: day(2), type: .autoRenewDisabled, occurredAt: day(2), basis: "detected"),
        TimeCase(name: "a date after asOf is capped at asOf", before: snap(at: day(1)), after: Apple().revoked(at: day(9)).snapshot(at: day(6)),
                 asOf: day(6), type: .refunded, occurredAt: day(6), basis: "detected"),
    ])
    func occurredAt(_ c: TimeCase) throws {
        let event = try #require(ChangeDetector.events(previous: c.before, current: c.after, asOf: c.asOf).events.first { $0.type == c.type })
        #expect(event.occurredAt == c.occurredAt)
        #expect(event.details["occurred_at_basis"] == c.basis)
    }

    struct DetailsCase: Sendable, CustomTestStringConvertible {
        let name: String
        let before: SubscriptionSnapshot
        let after: SubscriptionSnapshot
        let type: ChurnEventType
        let details: EventDetails
        var testDescription: String { name }
    }

    @Test("details carry old and new values", arguments: [
        DetailsCase(name: "expired carries the intent", before: snap(at: day(29)), after: Apple().expired(intent: 3).snapshot(at: day(31)),
                    type: .expired, details: ["expiration_intent": "price_increase_not_consented", "expiration_intent_raw": "3",
                                              "old_state": "active", "new_state": "expired"]),
        DetailsCase(name: "an unknown intent is kept raw", before: snap(at: day(29)), after: Apple().expired(intent: 9).snapshot(at: day(31)),
                    type: .expired, details: ["expiration_intent": "unknown", "expiration_intent_raw": "9"]),
        DetailsCase(name: "auto-renew old and new", before: snap(at: day(1)), after: Apple().autoRenew(false).snapshot(at: day(2)),
                    type: .autoRenewDisabled, details: ["old_auto_renew_status": "1", "new_auto_renew_status": "0"]),
        DetailsCase(name: "refund reason and type", before: snap(at: day(1)),
                    after: Apple().revoked(at: day(4), reason: 1, type: "REFUND_PRORATED").snapshot(at: day(6)),
                    type: .refunded, details: ["revocation_reason": "1", "revocation_type": "REFUND_PRORATED"]),
        DetailsCase(name: "plan change: old and new product", before: snap(at: day(1)),
                    after: Apple().newPeriod(2, at: day(10), product: "premium.monthly", reason: "PURCHASE").snapshot(at: day(11)),
                    type: .planChanged, details: ["old_product_id": "pro.monthly", "new_product_id": "premium.monthly", "kind": "immediate"]),
        DetailsCase(name: "scheduled change: old and new renewal product", before: snap(at: day(1)),
                    after: ChangeDetectorTests.pendingDowngrade.snapshot(at: day(2)), type: .planChangeScheduled,
                    details: ["old_auto_renew_product_id": "pro.monthly", "new_auto_renew_product_id": "lite.monthly"]),
        DetailsCase(name: "resubscribe: the win-back offer used", before: Apple().expired(intent: 1).snapshot(at: day(31)),
                    after: Apple().newPeriod(2, at: day(40), reason: "PURCHASE").with {
                        $0.transaction.offerType = 4
                        $0.transaction.offerIdentifier = "wb_half"
                    }.snapshot(at: day(41)),
                    type: .resubscribed, details: ["offer_type": "4", "offer_identifier": "wb_half", "old_expiration_intent": "1"]),
    ])
    func details(_ c: DetailsCase) throws {
        let event = try #require(ChangeDetector.events(previous: c.before, current: c.after, asOf: c.after.signedDate!).events.first { $0.type == c.type })
        for (key, value) in c.details {
            #expect(event.details[key] == value, "\(key)")
        }
    }

    @Test("events come in a fixed order: by time, then by the contract's order")
    func ordering() {
        let before = Apple().with { $0.renewal?.priceIncreaseStatus = 0 }.snapshot(at: day(29))
        // Renewed on day 30 at the new price, then auto-renew off and a downgrade chosen.
        let after = Apple().with { $0.renewal?.priceIncreaseStatus = 0 }.newPeriod(2, at: day(30))
            .autoRenew(false).with { $0.renewal?.autoRenewProductId = "lite.monthly" }.snapshot(at: day(31))
        let first = ChangeDetector.events(previous: before, current: after, asOf: day(31))
        #expect(first.events.map(\.type) == [.renewed, .priceIncreaseAccepted, .autoRenewDisabled, .planChangeScheduled])
        #expect(ChangeDetector.events(previous: before, current: after, asOf: day(31)) == first)
    }

    @Test("event names are exactly docs/contracts.md's")
    func eventNames() {
        #expect(ChurnEventType.allCases.map(\.rawValue) == [
            "auto_renew_disabled", "auto_renew_enabled", "billing_retry_started", "grace_period_started",
            "grace_period_expired", "billing_recovered", "renewed", "expired", "refunded", "refund_reversed",
            "plan_change_scheduled", "plan_change_cancelled", "plan_changed", "price_increase_pending",
            "price_increase_accepted", "resubscribed", "cancel_page_viewed",
        ])
    }

    @Test("an event encodes for the store with stable keys")
    func eventCodable() throws {
        let event = ChurnEvent(type: .expired, occurredAt: day(30), details: ["expiration_intent": "customer_cancelled"])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(event), as: UTF8.self)
        #expect(json == #"{"details":{"expiration_intent":"customer_cancelled"},"event":"expired","occurred_at_ms":1752592000000}"#)
        #expect(try JSONDecoder().decode(ChurnEvent.self, from: Data(json.utf8)) == event)
    }
}
