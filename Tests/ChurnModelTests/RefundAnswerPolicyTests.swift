import AppStoreModels
import ChurnModel
import Foundation
import Testing

/// The answer to a refund request: nothing without consent or after the deadline, the app's
/// delivery status and sample, and the preference the configured share gives.
@Suite("Refund answer policy")
struct RefundAnswerPolicyTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)
    static let day: TimeInterval = 86_400

    /// A monthly period from `start`; the request `daysIn` days into it.
    static func request(daysIn: Double, trial: Bool = false) -> RefundRequestFacts {
        let at = start.addingTimeInterval(daysIn * day)
        return RefundRequestFacts(requestedAt: at, deadline: at.addingTimeInterval(RefundAnswerPolicy.answerWindow),
                                  periodStart: start, periodEnd: start.addingTimeInterval(30 * day), trialSeen: trial)
    }

    @Test("no consent row, or a customer who refused: nothing is sent")
    func noConsent() {
        let r = Self.request(daysIn: 20)
        let policy = RefundAnswerPolicy(declineAfterShare: 0.5)
        #expect(policy.answer(r, consent: nil, now: r.requestedAt) == RefundAnswer(branch: .noConsent, body: nil))
        #expect(policy.answer(r, consent: RefundConsent(customerConsented: false), now: r.requestedAt).body == nil)
    }

    @Test("at or after the deadline nothing is sent, even with consent; a second before it the answer goes")
    func deadline() {
        let r = Self.request(daysIn: 2)
        let policy = RefundAnswerPolicy()
        let consent = RefundConsent(customerConsented: true)
        #expect(policy.answer(r, consent: consent, now: r.deadline).branch == .expired)
        #expect(policy.answer(r, consent: consent, now: r.deadline.addingTimeInterval(3600)).body == nil)
        #expect(policy.answer(r, consent: consent, now: r.deadline.addingTimeInterval(-1)).body != nil)
    }

    @Test("delivered, past the configured share of the period: DECLINE; before it, or with the policy off: no preference")
    func declineAfterShare() {
        let consent = RefundConsent(customerConsented: true)
        let policy = RefundAnswerPolicy(declineAfterShare: 0.5)
        let late = policy.answer(Self.request(daysIn: 16), consent: consent, now: Self.request(daysIn: 16).requestedAt)
        #expect(late.branch == .declineConsumed && late.body?.refundPreference == .decline)
        #expect(late.body == ConsumptionRequest(customerConsented: true, sampleContentProvided: false, deliveryStatus: .delivered,
                                                refundPreference: .decline))
        let early = policy.answer(Self.request(daysIn: 14), consent: consent, now: Self.request(daysIn: 14).requestedAt)
        #expect(early.branch == .noPreference && early.body?.refundPreference == nil)
        let off = RefundAnswerPolicy().answer(Self.request(daysIn: 29), consent: consent, now: Self.request(daysIn: 29).requestedAt)
        #expect(off.branch == .noPreference && off.body?.refundPreference == nil)
    }

    @Test("not delivered: the app's delivery status, no preference, whatever share has passed")
    func undelivered() {
        let r = Self.request(daysIn: 29)
        let a = RefundAnswerPolicy(declineAfterShare: 0).answer(
            r, consent: RefundConsent(customerConsented: true, deliveryStatus: .undeliveredServerOutage), now: r.requestedAt)
        #expect(a.branch == .undelivered && a.body?.deliveryStatus == .undeliveredServerOutage && a.body?.refundPreference == nil)
        #expect(a.body?.consumptionPercentage == nil)
    }

    @Test("the sample: the app's word when it gave one, else whether a free trial is on record")
    func sample() {
        let policy = RefundAnswerPolicy()
        let trial = Self.request(daysIn: 1, trial: true)
        #expect(policy.answer(trial, consent: RefundConsent(customerConsented: true), now: trial.requestedAt).body?.sampleContentProvided == true)
        #expect(policy.answer(trial, consent: RefundConsent(customerConsented: true, sampleContentProvided: false), now: trial.requestedAt)
                    .body?.sampleContentProvided == false)
        let none = Self.request(daysIn: 1)
        #expect(policy.answer(none, consent: RefundConsent(customerConsented: true, sampleContentProvided: true), now: none.requestedAt)
                    .body?.sampleContentProvided == true)
    }

    @Test("the share of the period is clamped to 0...1 and unknown without a period")
    func share() {
        #expect(Self.request(daysIn: 15).shareElapsed == 0.5)
        #expect(Self.request(daysIn: 45).shareElapsed == 1)
        #expect(Self.request(daysIn: -1).shareElapsed == 0)
        var r = Self.request(daysIn: 10)
        r.periodEnd = nil
        #expect(r.shareElapsed == nil)
        let a = RefundAnswerPolicy(declineAfterShare: 0).answer(r, consent: RefundConsent(customerConsented: true), now: r.requestedAt)
        #expect(a.branch == .noPreference)
    }

    @Test("the body encodes with Apple's field names and enum values, and leaves out what is unset")
    func encoding() throws {
        let body = ConsumptionRequest(customerConsented: true, sampleContentProvided: false, deliveryStatus: .undeliveredOther,
                                      refundPreference: .grantProrated)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let text = String(decoding: try encoder.encode(body), as: UTF8.self)
        #expect(text == #"{"customerConsented":true,"deliveryStatus":"UNDELIVERED_OTHER","refundPreference":"GRANT_PRORATED","sampleContentProvided":false}"#)
    }
}
