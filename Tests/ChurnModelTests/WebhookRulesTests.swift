import Foundation
import Testing
@testable import ChurnModel

@Suite("Webhooks: the retry schedule, what an answer means, who may be reached")
struct WebhookRulesTests {
    @Test("the standard schedule: 8 attempts, the waits of Standard Webhooks' example within ±10 %, dead after the last")
    func schedule() {
        let s = WebhookSchedule.standard
        #expect(s.attempts == 8)
        #expect(s.wait(afterFailure: 1, draw: 0.5) == 5)
        #expect(s.wait(afterFailure: 2, draw: 0) == 270)
        #expect(abs(s.wait(afterFailure: 7, draw: 0.999_999)! - 39_600) < 0.1)
        #expect(s.wait(afterFailure: 8, draw: 0.5) == nil)
        #expect(s.steps.reduce(0, +) == 99_305)  // 27 h 35 min 5 s from the first attempt to the last
        #expect(WebhookSchedule.parse("0,5s,5m,30m,2h,5h,10h,10h")?.steps == s.steps)
        #expect(WebhookSchedule.parse("0, 1.5s ,1d")?.steps == [0, 1.5, 86_400])
        for bad in ["", "0,,1s", "x", "-1s", "8d", Array(repeating: "1s", count: 21).joined(separator: ",")] {
            #expect(WebhookSchedule.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("2xx delivered, 410 gone, 429 and 503 with Retry-After pause the endpoint (capped at a day), anything else retried")
    func outcomes() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(WebhookOutcome.classify(status: 204, retryAfter: nil, now: now) == .delivered)
        #expect(WebhookOutcome.classify(status: 410, retryAfter: nil, now: now) == .gone)
        #expect(WebhookOutcome.classify(status: 429, retryAfter: "120", now: now) == .failed(notBefore: 120, pauseEndpoint: true))
        #expect(WebhookOutcome.classify(status: 503, retryAfter: "99999999", now: now) == .failed(notBefore: 86_400, pauseEndpoint: true))
        #expect(WebhookOutcome.classify(status: 500, retryAfter: "120", now: now) == .failed(notBefore: nil, pauseEndpoint: false))
        #expect(WebhookOutcome.classify(status: 302, retryAfter: nil, now: now) == .failed(notBefore: nil, pauseEndpoint: false))
        #expect(WebhookOutcome.classify(status: nil, retryAfter: nil, now: now) == .failed(notBefore: nil, pauseEndpoint: false))
        #expect(WebhookOutcome.classify(status: 429, retryAfter: "soon", now: now) == .failed(notBefore: nil, pauseEndpoint: false))
        let date = WebhookOutcome.retryAfter("Fri, 15 Jan 2027 08:01:40 GMT", now: now)
        #expect(date == TimeInterval(100))
    }

    @Test("the next step: a Retry-After longer than the schedule's wait wins; the last failure is dead")
    func next() {
        let s = WebhookSchedule(steps: [0, 5, 60], jitter: 0)
        #expect(WebhookNext.after(.delivered, failedBefore: 2, schedule: s, draw: 0.5) == .delivered)
        #expect(WebhookNext.after(.failed(notBefore: nil, pauseEndpoint: false), failedBefore: 0, schedule: s, draw: 0.5) == .retry(wait: 5, pause: nil))
        #expect(WebhookNext.after(.failed(notBefore: 30, pauseEndpoint: true), failedBefore: 0, schedule: s, draw: 0.5) == .retry(wait: 30, pause: 30))
        #expect(WebhookNext.after(.failed(notBefore: 30, pauseEndpoint: true), failedBefore: 1, schedule: s, draw: 0.5) == .retry(wait: 60, pause: 30))
        #expect(WebhookNext.after(.failed(notBefore: nil, pauseEndpoint: false), failedBefore: 2, schedule: s, draw: 0.5) == .dead)
        #expect(WebhookNext.after(.gone, failedBefore: 0, schedule: s, draw: 0.5) == .gone)
    }

    @Test("loopback, private, link-local, CGNAT, unique-local and mapped addresses are private; public ones are not")
    func addresses() {
        for (bytes, range) in [([127, 0, 0, 1], "loopback"), ([10, 1, 2, 3], "private"), ([172, 31, 0, 1], "private"),
                               ([192, 168, 1, 1], "private"), ([169, 254, 169, 254], "link-local"), ([100, 100, 0, 1], "carrier-grade NAT"),
                               ([0, 0, 0, 0], "unspecified"), ([224, 0, 0, 1], "multicast")] as [([UInt8], String)] {
            #expect(NetworkAddress.privateRange(bytes) == range, "\(bytes)")
        }
        for bytes in [[8, 8, 8, 8], [172, 32, 0, 1], [100, 128, 0, 1], [17, 253, 144, 10]] as [[UInt8]] {
            #expect(NetworkAddress.privateRange(bytes) == nil, "\(bytes)")
        }
        let v6 = { (prefix: [UInt8]) in prefix + [UInt8](repeating: 0, count: 16 - prefix.count) }
        #expect(NetworkAddress.privateRange([UInt8](repeating: 0, count: 15) + [1]) == "loopback")
        #expect(NetworkAddress.privateRange(v6([0xfd, 0x12])) == "unique local")
        #expect(NetworkAddress.privateRange(v6([0xfe, 0x80])) == "link-local")
        #expect(NetworkAddress.privateRange([UInt8](repeating: 0, count: 10) + [0xff, 0xff, 169, 254, 169, 254]) == "IPv4-mapped link-local")
        #expect(NetworkAddress.privateRange(v6([0x26, 0x07, 0xf8, 0xb0])) == nil)
    }

    @Test("endpoint names and URLs: https, http only when allowed, no credentials, no fragment; types by name")
    func endpoints() throws {
        #expect(WebhookEndpointRules.nameProblem("crm-1.prod_a") == nil)
        #expect(WebhookEndpointRules.nameProblem("-x") != nil && WebhookEndpointRules.nameProblem("a b") != nil)
        #expect(WebhookEndpointRules.urlProblem("https://hooks.example.com/churn?x=1", allowHTTP: false) == nil)
        #expect(WebhookEndpointRules.urlProblem("http://127.0.0.1:9/h", allowHTTP: false)?.contains("--allow-http") == true)
        #expect(WebhookEndpointRules.urlProblem("http://127.0.0.1:9/h", allowHTTP: true) == nil)
        #expect(WebhookEndpointRules.urlProblem("https://u:p@example.com/", allowHTTP: false) != nil)
        #expect(WebhookEndpointRules.urlProblem("ftp://example.com/x", allowHTTP: true) != nil)
        #expect(WebhookEndpointRules.urlProblem("example.com/x", allowHTTP: true) != nil)
        #expect(try WebhookEndpointRules.types(["churn_event.created,segment.changed", "segment.changed"]).get() == [.churnEventCreated, .segmentChanged])
        #expect(throws: WebhookEndpointRules.EndpointError.self) { try WebhookEndpointRules.types(["webhook.test"]).get() }
    }
}
