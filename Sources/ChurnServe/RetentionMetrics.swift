import ChurnModel
import Foundation
import Synchronization

/// What the cancel page's door counts in this process (appended to `GET /metrics`).
public final class RetentionMetrics: Sendable {
    struct State {
        /// Answers by app, arm and kind (`default` for the default message, `none` for no body).
        var answers: [String: [String: Int]] = [:]
        /// Answers chosen without the database's facts (it did not answer in time).
        var withoutFacts: [String: Int] = [:]
        var rejected: [String: Int] = [:]
        var recordFailures = 0
        var recordPending = 0
        var recordDropped = 0
    }

    private let state = Mutex(State())

    public init() {}

    static let reasons = ["body", "unknown_app", "verification", "stale"]

    func answered(app: String, arm: RetentionArm, kind: String, factsKnown: Bool) {
        state.withLock { s in
            s.answers[app, default: [:]][arm.rawValue + "\u{0}" + kind, default: 0] += 1
            if !factsKnown { s.withoutFacts[app, default: 0] += 1 }
        }
    }

    func rejected(_ reason: String) { state.withLock { $0.rejected[reason, default: 0] += 1 } }

    func recorder(failed: Bool, pending: Int) {
        state.withLock { s in
            if failed { s.recordFailures += 1 }
            s.recordPending = pending
        }
    }

    /// An answered request not recorded: the recorder already held its maximum.
    func recordDropped() { state.withLock { $0.recordDropped += 1 } }

    var text: String {
        let s = state.withLock { $0 }
        var out = PrometheusText()
        out.family("churnwatch_serve_retention_answers_total", .counter,
                   "Cancel-page requests answered, by app, arm (treated, holdout, no_rule) and kind (message, alternate_product, promotional_offer, default, none).")
        for (app, byKey) in s.answers.sorted(by: { $0.key < $1.key }) {
            for (key, n) in byKey.sorted(by: { $0.key < $1.key }) {
                let parts = key.split(separator: "\u{0}").map(String.init)
                out.sample("churnwatch_serve_retention_answers_total", [("bundle_id", app), ("arm", parts[0]), ("kind", parts[1])], Double(n))
            }
        }
        out.family("churnwatch_serve_retention_without_facts_total", .counter,
                   "Cancel-page answers chosen from the cached rules alone: the database did not answer in time.")
        for (app, n) in s.withoutFacts.sorted(by: { $0.key < $1.key }) {
            out.sample("churnwatch_serve_retention_without_facts_total", [("bundle_id", app)], Double(n))
        }
        out.family("churnwatch_serve_retention_rejected_total", .counter,
                   "Cancel-page requests refused (a 4xx), by why: body, unknown_app, verification, stale.")
        for r in Self.reasons { out.sample("churnwatch_serve_retention_rejected_total", [("reason", r)], Double(s.rejected[r] ?? 0)) }
        out.family("churnwatch_serve_retention_record_failures_total", .counter, "Writes of answered requests that failed (retried).")
        out.sample("churnwatch_serve_retention_record_failures_total", [], Double(s.recordFailures))
        out.family("churnwatch_serve_retention_record_dropped_total", .counter,
                   "Answered requests never recorded: 20,000 were waiting for the database already.")
        out.sample("churnwatch_serve_retention_record_dropped_total", [], Double(s.recordDropped))
        out.family("churnwatch_serve_retention_record_pending", .gauge, "Answered requests not recorded yet (the database slow or down).")
        out.sample("churnwatch_serve_retention_record_pending", [], Double(s.recordPending))
        return out.text
    }
}
