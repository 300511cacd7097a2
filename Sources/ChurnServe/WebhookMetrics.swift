import ChurnModel
import ChurnStore
import Foundation
import Synchronization

/// The sender's counts since it started (per endpoint), and the database's view of every
/// endpoint, as Prometheus text: serve's `/metrics` and `webhooks send`'s textfile.
public final class WebhookMetrics: Sendable {
    static let buckets: [Double] = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 60, 600, 3_600]

    struct Histogram {
        var counts = [Int](repeating: 0, count: WebhookMetrics.buckets.count)
        var sum = 0.0, count = 0
        mutating func add(_ v: Double) {
            for (i, b) in WebhookMetrics.buckets.enumerated() where v <= b { counts[i] += 1 }
            sum += v
            count += 1
        }
    }

    struct Endpoint {
        var results: [String: Int] = [:]
        var attempt = Histogram()
        /// From the message being written to its delivery.
        var lag = Histogram()
    }

    private let state = Mutex<[String: Endpoint]>([:])
    /// The database's view, refreshed by the sender every few seconds (`/metrics` answers from
    /// it without waiting on the database).
    private let seen = Mutex<(stats: [WebhookEndpointStats], unsequenced: Int?, at: Date)?>(nil)

    public func saw(_ stats: [WebhookEndpointStats], unsequenced: Int, at: Date) { seen.withLock { $0 = (stats, unsequenced, at) } }

    /// The text of the last view and the counts, for `/metrics`.
    public var text: String {
        var text = PrometheusText()
        let last = seen.withLock { $0 }
        render(&text, stats: last?.stats ?? [], unsequenced: last?.unsequenced, now: last?.at ?? Date())
        return text.text
    }

    public init() {}

    /// One attempt's end: its result, how long it took, and for a delivery how long after its
    /// message was written.
    public func attempt(endpoint: String, next: WebhookNext, seconds: Double, sinceWritten: Double?) {
        state.withLock { all in
            var e = all[endpoint] ?? Endpoint()
            let result: String
            switch next {
            case .delivered: result = "delivered"
            case .retry: result = "failed"
            case .dead: result = "dead"
            case .gone: result = "gone"
            case .released: return
            }
            e.results[result, default: 0] += 1
            e.attempt.add(seconds)
            if case .delivered = next, let sinceWritten { e.lag.add(max(0, sinceWritten)) }
            all[endpoint] = e
        }
    }

    /// Deliveries that ended delivered (all endpoints).
    public var delivered: Int { state.withLock { $0.values.reduce(0) { $0 + ($1.results["delivered"] ?? 0) } } }

    public func render(_ text: inout PrometheusText, stats: [WebhookEndpointStats], unsequenced: Int?, now: Date) {
        let counts = state.withLock { $0 }
        text.family("churnwatch_webhook_attempts_total", .counter, "Webhook attempts by endpoint and result (delivered, failed: tried again, dead, gone: 410) since start.")
        for (name, e) in counts.sorted(by: { $0.key < $1.key }) {
            for (result, n) in e.results.sorted(by: { $0.key < $1.key }) {
                text.sample("churnwatch_webhook_attempts_total", [("endpoint", name), ("result", result)], Double(n))
            }
        }
        histogram(&text, "churnwatch_webhook_attempt_seconds", "One attempt, request to answer.", counts.mapValues(\.attempt))
        histogram(&text, "churnwatch_webhook_delivery_lag_seconds", "From a message being written to its delivery.", counts.mapValues(\.lag))
        text.family("churnwatch_webhook_pending", .gauge, "Deliveries waiting, per endpoint.")
        text.family("churnwatch_webhook_oldest_pending_seconds", .gauge, "Age of the oldest waiting delivery's message (0: none).")
        text.family("churnwatch_webhook_dead", .gauge, "Deliveries dead after the last attempt, kept (webhooks replay sends them again).")
        text.family("churnwatch_webhook_endpoint_up", .gauge, "1: enabled and not failing; 0: failing or paused; -1: disabled.")
        for s in stats {
            let labels = [("endpoint", s.endpoint.name), ("bundle_id", s.endpoint.bundleId)]
            text.sample("churnwatch_webhook_pending", labels, Double(s.pending))
            text.sample("churnwatch_webhook_oldest_pending_seconds", labels, s.oldestPending.map { max(0, now.timeIntervalSince($0)) } ?? 0)
            text.sample("churnwatch_webhook_dead", labels, Double(s.dead))
            let up = !s.endpoint.enabled ? -1.0 : (s.endpoint.consecutiveFailures > 0 || (s.endpoint.pausedUntil ?? .distantPast) > now) ? 0 : 1
            text.sample("churnwatch_webhook_endpoint_up", labels, up)
        }
        if let unsequenced {
            text.family("churnwatch_webhook_unnumbered", .gauge, "Messages written and not yet numbered by a sender (none running, or behind).")
            text.sample("churnwatch_webhook_unnumbered", [], Double(unsequenced))
        }
    }

    private func histogram(_ text: inout PrometheusText, _ name: String, _ help: String, _ all: [String: Histogram]) {
        text.family(name, .histogram, help)
        for (endpoint, h) in all.sorted(by: { $0.key < $1.key }) where h.count > 0 {
            for (i, b) in Self.buckets.enumerated() {
                text.sample(name + "_bucket", [("endpoint", endpoint), ("le", PrometheusText.format(b))], Double(h.counts[i]))
            }
            text.sample(name + "_bucket", [("endpoint", endpoint), ("le", "+Inf")], Double(h.count))
            text.sample(name + "_sum", [("endpoint", endpoint)], h.sum)
            text.sample(name + "_count", [("endpoint", endpoint)], Double(h.count))
        }
    }
}
