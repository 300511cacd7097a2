import Foundation
import Testing
@testable import ChurnModel

/// One nightly poll of a story and what must follow from it.
struct Poll: Sendable {
    let at: Date
    let apple: Apple
    let events: [ChurnEventType]
    let segment: Segment
    /// Queue entries this poll adds (an episode already queued adds nothing).
    var created: [WinbackCampaign] = []
    /// Pending queue entries this poll makes obsolete.
    var obsoleted: [WinbackCampaign] = []
    var stale = false
    /// The period start the stored snapshot must show after this poll, when it matters.
    var periodStart: Date?
}

func poll(
    _ n: Double, _ apple: Apple, _ events: [ChurnEventType], _ segment: Segment,
    created: [WinbackCampaign] = [], obsoleted: [WinbackCampaign] = [], stale: Bool = false, periodStart: Date? = nil
) -> Poll {
    Poll(at: day(n), apple: apple, events: events, segment: segment, created: created, obsoleted: obsoleted, stale: stale,
         periodStart: periodStart)
}

struct Story: Sendable, CustomTestStringConvertible {
    let name: String
    let polls: [Poll]
    var testDescription: String { name }
}

/// The stories (a)–(p), each over several polls; (q) is in SubscriptionSnapshotTests.
enum Stories {
    static let a = Apple()
    static let pendingLite = a.with { $0.renewal?.autoRenewProductId = "lite.monthly" }
    static let grace = a.billingFailed(grace: day(36))
    static let priceIncrease = a.with { $0.renewal?.priceIncreaseStatus = 0 }
    static let family = a.with { $0.transaction.inAppOwnershipType = "FAMILY_SHARED" }
    static let upgraded = a.newPeriod(2, at: day(10), product: "premium.monthly", reason: "PURCHASE").with {
        $0.history = [Apple().with { $0.transaction.isUpgraded = true }.transaction, $0.transaction]
    }
    static let leaving = a.autoRenew(false)
    static let unknownIntent = a.expired(intent: 9).with { $0.transaction.offerDiscountType = "SOMETHING_NEW" }

    static let all: [Story] = [
        Story(name: "a: bought, auto-renew off two days later, on again two days after that", polls: [
            poll(0.5, a, [], .active),
            poll(2.5, a.autoRenew(false), [.autoRenewDisabled], .willNotRenew, created: [.saveOffer]),
            poll(3.5, a.autoRenew(false), [], .willNotRenew),
            poll(4.5, a, [.autoRenewEnabled], .active, obsoleted: [.saveOffer]),
            poll(30.5, a.newPeriod(2, at: day(30)), [.renewed], .active),
        ]),
        Story(name: "b: downgrade chosen instead of leaving", polls: [
            poll(0.5, a, [], .active),
            poll(10.5, a.autoRenew(false), [.autoRenewDisabled], .willNotRenew, created: [.saveOffer]),
            poll(11.5, pendingLite, [.autoRenewEnabled, .planChangeScheduled], .planChangePending, obsoleted: [.saveOffer]),
            poll(30.5, pendingLite.newPeriod(2, at: day(30), product: "lite.monthly"), [.renewed, .planChanged], .active),
        ]),
        Story(name: "c: billing failure at renewal, retry, recovered within a week", polls: [
            poll(29.5, a, [], .active),
            poll(30.5, a.billingFailed(), [.billingRetryStarted], .billingRetry, created: [.billingFix]),
            poll(31.5, a.billingFailed(), [], .billingRetry),
            poll(33.5, a.newPeriod(2, at: day(33)), [.billingRecovered], .active, obsoleted: [.billingFix], periodStart: day(33)),
            poll(63.5, a.newPeriod(2, at: day(33)).newPeriod(3, at: day(63)), [.renewed], .active, periodStart: day(63)),
        ]),
        Story(name: "d: grace period expires while retry continues, then expiry with intent 2", polls: [
            poll(29.5, a, [], .active),
            poll(30.5, grace, [.gracePeriodStarted], .gracePeriod, created: [.billingFix]),
            poll(36.5, grace.with { $0.status = 3 }, [.gracePeriodExpired], .billingRetry),
            poll(60.5, grace.with { $0.status = 3 }, [], .billingRetry),
            poll(89.5, grace.expired(intent: 2), [.expired], .churnedBilling, created: [.resubscribePrompt], obsoleted: [.billingFix]),
        ]),
        Story(name: "e: refund through customer support, then reversed", polls: [
            poll(1.5, a, [], .active),
            poll(10.5, a.revoked(at: day(10)), [.refunded], .refunded),
            poll(11.5, a.revoked(at: day(10)), [], .refunded),
            poll(20.5, a.autoRenew(false), [.refundReversed], .willNotRenew, created: [.saveOffer]),
        ]),
        Story(name: "f: voluntary expiry with Apple's win-back offer ids", polls: [
            poll(0.5, a, [], .active),
            poll(15.5, a.autoRenew(false), [.autoRenewDisabled], .willNotRenew, created: [.saveOffer]),
            poll(30.5, a.expired(intent: 1, winBackOffers: ["wb_half", "wb_free"]), [.expired], .churnedVoluntary, created: [.winbackOffer]),
            poll(31.5, a.expired(intent: 1, winBackOffers: ["wb_half", "wb_free"]), [], .churnedVoluntary),
        ]),
        Story(name: "g: price increase not accepted, intent 3", polls: [
            poll(0.5, a, [], .active),
            poll(20.5, priceIncrease, [.priceIncreasePending], .priceIncreasePending, created: [.saveOffer]),
            poll(30.5, priceIncrease.expired(intent: 3), [.expired], .churnedPriceIncrease, created: [.winbackOffer]),
        ]),
        Story(name: "h: product removed from sale, intent 4", polls: [
            poll(0.5, a, [], .active),
            poll(30.5, a.expired(intent: 4), [.expired], .churnedProductUnavailable, created: [.resubscribePrompt]),
        ]),
        Story(name: "i: free trial with auto-renew off, then expiry", polls: [
            poll(0.5, WinbackPlannerTests.trial, [], .active),
            poll(1.5, WinbackPlannerTests.trial.autoRenew(false), [.autoRenewDisabled], .willNotRenew, created: [.saveOffer]),
            poll(7.5, WinbackPlannerTests.trial.expired(intent: 1), [.expired], .churnedVoluntary, created: [.winbackOffer]),
        ]),
        Story(name: "j: immediate upgrade, old transaction upgraded, not a churn", polls: [
            poll(0.5, a, [], .active),
            poll(10.5, upgraded, [.planChanged], .active),
            poll(40.5, upgraded.newPeriod(3, at: day(40)), [.renewed], .active),
        ]),
        Story(name: "j': immediate upgrade known from the history alone (no transactionReason)", polls: [
            poll(0.5, a, [], .active),
            poll(10.5, upgraded.with { $0.transaction.transactionReason = nil }, [.planChanged], .active),
        ]),
        Story(name: "k: family-shared: events and segments, no campaign, family revoke", polls: [
            poll(0.5, family, [], .active),
            poll(5.5, family.autoRenew(false), [.autoRenewDisabled], .willNotRenew),
            poll(12.5, family.revoked(at: day(12), type: "FAMILY_REVOKE"), [.refunded], .refunded),
        ]),
        Story(name: "l: resubscribe after churn with a win-back offer", polls: [
            poll(29.5, leaving, [], .willNotRenew, created: [.saveOffer]),
            poll(30.5, leaving.expired(intent: 1, winBackOffers: ["wb_half"]), [.expired], .churnedVoluntary, created: [.winbackOffer]),
            poll(45.5, a.newPeriod(2, at: day(45), reason: "PURCHASE").with {
                $0.transaction.offerType = 4
                $0.transaction.offerIdentifier = "wb_half"
                $0.transaction.offerDiscountType = "PAY_UP_FRONT"
            }, [.resubscribed], .active, obsoleted: [.winbackOffer], periodStart: day(45)),
        ]),
        Story(name: "m: renewals while the app was never opened, some polls missed", polls: [
            poll(0.5, a, [], .active),
            poll(30.5, a.newPeriod(2, at: day(30)), [.renewed], .active),
            poll(60.5, a.newPeriod(3, at: day(60)), [.renewed], .active),
            poll(150.5, a.newPeriod(6, at: day(150)), [.renewed], .active, periodStart: day(150)),
        ]),
        Story(name: "n: unknown enum values and an unknown expiration intent", polls: [
            poll(0.5, a.with { $0.transaction.offerDiscountType = "SOMETHING_NEW" }, [], .active),
            poll(30.5, unknownIntent, [.expired], .churnedOther, created: [.winbackOffer]),
            poll(31.5, unknownIntent.with { $0.status = 7 }, [], .unknown),
            poll(32.5, unknownIntent, [], .churnedOther),
        ]),
        Story(name: "o: a stale snapshot", polls: [
            poll(0.5, a, [], .active),
            poll(10.5, a.autoRenew(false), [.autoRenewDisabled], .willNotRenew, created: [.saveOffer]),
            poll(11.5, a.with { $0.signedAt = day(9) }, [], .willNotRenew, stale: true),
            poll(12.5, a.autoRenew(false), [], .willNotRenew),
        ]),
        Story(name: "p: the same snapshot twice", polls: [
            poll(0.5, leaving.with { $0.signedAt = day(0.5) }, [], .willNotRenew, created: [.saveOffer]),
            poll(0.5, leaving.with { $0.signedAt = day(0.5) }, [], .willNotRenew),
            poll(1.5, leaving, [], .willNotRenew),
        ]),
    ]
}

@Suite("Stories")
struct StoryTests {
    @Test("each story, poll by poll", arguments: Stories.all)
    func story(_ story: Story) {
        var stored: SubscriptionSnapshot?
        var segment: SegmentState?
        var queue: [WinbackEpisode: String] = [:]
        for (index, poll) in story.polls.enumerated() {
            let context = Comment(rawValue: "poll \(index + 1) on day \(poll.at.timeIntervalSince(day(0)) / 86_400)")
            let current = poll.apple.snapshot(at: poll.at)
            let result = ChangeDetector.events(previous: stored, current: current, asOf: poll.at)
            let decision = WinbackPlanner.decide(previous: stored, current: current, asOf: poll.at)
            if result.shouldStore { stored = current }
            segment = SegmentClassifier.next(previous: segment, snapshot: stored, asOf: poll.at)

            var created: [WinbackCampaign] = []
            for entry in decision.entries where queue[entry.episodeRef] == nil {
                queue[entry.episodeRef] = "pending"
                created.append(entry.campaign)
            }
            var obsoleted: [WinbackCampaign] = []
            for episode in decision.obsolete where queue[episode.episodeRef] == "pending" {
                queue[episode.episodeRef] = "obsolete"
                obsoleted.append(episode.campaign)
            }

            #expect(result.events.map(\.type) == poll.events, context)
            #expect(result.isBaseline == (index == 0), context)
            #expect(result.stale == poll.stale, context)
            #expect(segment?.segment == poll.segment, context)
            #expect(created == poll.created, context)
            #expect(obsoleted == poll.obsoleted, context)
            if let start = poll.periodStart { #expect(stored?.periodStart == start, context) }
            // Nothing the model produces is ever "auto-renew off" for an expiry, refund or failure.
            if result.events.contains(where: { [.expired, .refunded, .billingRetryStarted].contains($0.type) }) {
                #expect(!result.events.contains { $0.type == .autoRenewDisabled }, context)
            }
        }
    }

    @Test("story n: the unknown values are flagged and kept in the events' details")
    func unknownFlagged() throws {
        let before = Stories.a.snapshot(at: day(29.5))
        let after = Stories.unknownIntent.snapshot(at: day(30.5))
        let result = ChangeDetector.events(previous: before, current: after, asOf: day(30.5))
        #expect(result.unknownValues == [
            UnknownValue(field: "expirationIntent", raw: "9"),
            UnknownValue(field: "offerDiscountType", raw: "SOMETHING_NEW"),
        ])
        let expired = try #require(result.events.first)
        #expect(expired.details["expiration_intent"] == "unknown")
        #expect(expired.details["expiration_intent_raw"] == "9")
    }

    @Test("story f: the win-back entry carries Apple's offer ids, best first")
    func winbackOfferIds() throws {
        let decision = WinbackPlanner.decide(previous: Stories.a.autoRenew(false).snapshot(at: day(15.5)),
                                             current: Stories.a.expired(intent: 1, winBackOffers: ["wb_half", "wb_free"]).snapshot(at: day(30.5)),
                                             asOf: day(30.5))
        let entry = try #require(decision.entries.first)
        #expect(entry.offerIds == ["wb_half", "wb_free"])
        #expect(entry.episode == "expired:w1")
    }
}
