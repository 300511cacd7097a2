import Foundation
import Testing
@testable import ChurnModel

@Suite("SegmentClassifier")
struct SegmentClassifierTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let apple: Apple?
        let asOf: Date
        let segment: Segment
        var testDescription: String { name }
    }

    @Test("docs/contracts.md segment table, first match wins", arguments: [
        Case(name: "refunded", apple: Apple().revoked(at: day(3)), asOf: day(4), segment: .refunded),
        Case(name: "refunded: family revoke", apple: Apple().revoked(at: day(3), type: "FAMILY_REVOKE"), asOf: day(4), segment: .refunded),
        Case(name: "refunded wins over expired", apple: Apple().expired(intent: 1).with { $0.transaction.revocationDate = day(20) },
             asOf: day(31), segment: .refunded),
        Case(name: "churned_voluntary", apple: Apple().expired(intent: 1), asOf: day(31), segment: .churnedVoluntary),
        Case(name: "churned_billing", apple: Apple().expired(intent: 2), asOf: day(91), segment: .churnedBilling),
        Case(name: "churned_price_increase", apple: Apple().expired(intent: 3), asOf: day(31), segment: .churnedPriceIncrease),
        Case(name: "churned_product_unavailable", apple: Apple().expired(intent: 4), asOf: day(31), segment: .churnedProductUnavailable),
        Case(name: "churned_other: intent 5", apple: Apple().expired(intent: 5), asOf: day(31), segment: .churnedOther),
        Case(name: "churned_other: unknown intent", apple: Apple().expired(intent: 42), asOf: day(31), segment: .churnedOther),
        Case(name: "churned_other: no intent", apple: Apple().expired(intent: nil), asOf: day(31), segment: .churnedOther),
        Case(name: "grace_period", apple: Apple().billingFailed(grace: day(36)), asOf: day(31), segment: .gracePeriod),
        Case(name: "billing_retry: grace already over at asOf", apple: Apple().billingFailed(grace: day(36)), asOf: day(37),
             segment: .billingRetry),
        Case(name: "billing_retry", apple: Apple().billingFailed(), asOf: day(31), segment: .billingRetry),
        Case(name: "will_not_renew", apple: Apple().autoRenew(false), asOf: day(2), segment: .willNotRenew),
        Case(name: "will_not_renew wins over a pending price increase",
             apple: Apple().autoRenew(false).with { $0.renewal?.priceIncreaseStatus = 0 }, asOf: day(2), segment: .willNotRenew),
        Case(name: "price_increase_pending", apple: Apple().with { $0.renewal?.priceIncreaseStatus = 0 }, asOf: day(2),
             segment: .priceIncreasePending),
        Case(name: "price increase accepted is active", apple: Apple().with { $0.renewal?.priceIncreaseStatus = 1 }, asOf: day(2),
             segment: .active),
        Case(name: "plan_change_pending", apple: Apple().with { $0.renewal?.autoRenewProductId = "lite.monthly" }, asOf: day(2),
             segment: .planChangePending),
        Case(name: "active", apple: Apple(), asOf: day(2), segment: .active),
        Case(name: "active: unknown auto-renew value is not read as off", apple: Apple().with { $0.renewal?.autoRenewStatus = 7 },
             asOf: day(2), segment: .active),
        Case(name: "unknown: never polled", apple: nil, asOf: day(2), segment: .unknown),
        Case(name: "unknown: status Apple hasn't invented yet", apple: Apple().with { $0.status = 6 }, asOf: day(2), segment: .unknown),
    ])
    func segment(_ c: Case) {
        #expect(SegmentClassifier.segment(for: c.apple?.snapshot(at: c.asOf), asOf: c.asOf) == c.segment)
    }

    struct SinceCase: Sendable, CustomTestStringConvertible {
        let name: String
        let previous: SegmentState?
        let apple: Apple?
        let expected: SegmentState
        var testDescription: String { name }
    }

    @Test("segment_since is kept while the segment doesn't change", arguments: [
        SinceCase(name: "first poll starts the segment", previous: nil, apple: Apple(), expected: SegmentState(.active, since: day(5))),
        SinceCase(name: "same segment keeps since", previous: SegmentState(.active, since: day(1)), apple: Apple(),
                  expected: SegmentState(.active, since: day(1))),
        SinceCase(name: "new segment starts at asOf", previous: SegmentState(.active, since: day(1)), apple: Apple().autoRenew(false),
                  expected: SegmentState(.willNotRenew, since: day(5))),
        SinceCase(name: "never verified is unknown", previous: nil, apple: nil, expected: SegmentState(.unknown, since: day(5))),
    ])
    func since(_ c: SinceCase) {
        let next = SegmentClassifier.next(previous: c.previous, snapshot: c.apple?.snapshot(at: day(5)), asOf: day(5))
        #expect(next == c.expected)
        #expect(SegmentState.next(previous: c.previous, snapshot: c.apple?.snapshot(at: day(5)), asOf: day(5)) == next)
    }

    @Test("segment names are exactly docs/contracts.md's, in classification order")
    func segmentNames() {
        #expect(Segment.allCases.map(\.rawValue) == [
            "refunded", "churned_voluntary", "churned_billing", "churned_price_increase", "churned_product_unavailable",
            "churned_other", "grace_period", "billing_retry", "will_not_renew", "price_increase_pending",
            "plan_change_pending", "active", "unknown",
        ])
    }
}
