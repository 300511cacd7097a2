import ChurnModel
import Foundation
import Synchronization

/// What `churnwatch serve` counts in this process, for `GET /metrics` (Prometheus text). Every
/// process counts its own: scrape each one (several behind a balancer add up).
public final class ServeMetrics: Sendable {
    /// Upper bounds of the latency buckets, in seconds.
    static let buckets: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Latency {
        var counts = [Int](repeating: 0, count: ServeMetrics.buckets.count)
        var sum = 0.0
        var count = 0
    }

    struct State {
        var requests: [String: [Int: Int]] = [:]
        var latency: [String: Latency] = [:]
        var rejected: [String: Int] = [:]
        var stored = 0
        var known = 0
        /// Per app: notifications applied by outcome, and events written.
        var applied: [String: [String: Int]] = [:]
        var events: [String: Int] = [:]
        var inboxPending = 0
        var applierLag = 0.0
        var applierErrors = 0
    }

    private let state = Mutex(State())
    public let door: DoorCounters

    public init(door: DoorCounters) {
        self.door = door
    }

    /// A request answered: its route (the path when known, else "other"), status and seconds.
    public func request(route: String, status: Int, seconds: Double) {
        state.withLock { s in
            s.requests[route, default: [:]][status, default: 0] += 1
            var l = s.latency[route] ?? Latency()
            if let i = Self.buckets.firstIndex(where: { seconds <= $0 }) { l.counts[i] += 1 }
            l.sum += seconds
            l.count += 1
            s.latency[route] = l
        }
    }

    /// A notification refused before anything was written, by kind (`body`, `unknown_app`, `verification`).
    public func rejected(_ kind: String) { state.withLock { $0.rejected[kind, default: 0] += 1 } }

    /// A verified notification: stored now, or already known.
    public func received(stored: Bool) { state.withLock { stored ? ($0.stored += 1) : ($0.known += 1) } }

    /// What one drain of an app's inbox applied.
    public func applied(app: String, outcomes: [String: Int], events: Int) {
        state.withLock { s in
            for (o, n) in outcomes { s.applied[app, default: [:]][o, default: 0] += n }
            s.events[app, default: 0] += events
        }
    }

    /// The inbox as the applier last saw it: rows waiting, and the age of the oldest (seconds).
    public func backlog(pending: Int, lag: Double) { state.withLock { ($0.inboxPending, $0.applierLag) = (pending, lag) } }

    public func applierError() { state.withLock { $0.applierErrors += 1 } }

    /// The exposition.
    public var text: String {
        let s = state.withLock { $0 }
        var out = PrometheusText()
        out.family("churnwatch_serve_requests_total", .counter, "Requests answered, by route and status.")
        for (route, statuses) in s.requests.sorted(by: { $0.key < $1.key }) {
            for (status, n) in statuses.sorted(by: { $0.key < $1.key }) {
                out.sample("churnwatch_serve_requests_total", [("route", route), ("status", String(status))], Double(n))
            }
        }
        out.family("churnwatch_serve_request_duration_seconds", .histogram, "Seconds from a request read whole to its answer, by route.")
        for (route, l) in s.latency.sorted(by: { $0.key < $1.key }) {
            var cumulative = 0
            for (i, bound) in Self.buckets.enumerated() {
                cumulative += l.counts[i]
                out.sample("churnwatch_serve_request_duration_seconds_bucket", [("route", route), ("le", PrometheusText.format(bound))], Double(cumulative))
            }
            out.sample("churnwatch_serve_request_duration_seconds_bucket", [("route", route), ("le", "+Inf")], Double(l.count))
            out.sample("churnwatch_serve_request_duration_seconds_sum", [("route", route)], l.sum)
            out.sample("churnwatch_serve_request_duration_seconds_count", [("route", route)], Double(l.count))
        }
        out.family("churnwatch_serve_notifications_rejected_total", .counter,
                   "Notifications refused before anything was stored (a 4xx), by why: body, unknown_app, verification.")
        for kind in ["body", "unknown_app", "verification"] {
            out.sample("churnwatch_serve_notifications_rejected_total", [("reason", kind)], Double(s.rejected[kind] ?? 0))
        }
        out.family("churnwatch_serve_notifications_received_total", .counter,
                   "Verified notifications answered 200: stored now, or already known (a repeated delivery).")
        out.sample("churnwatch_serve_notifications_received_total", [("result", "stored")], Double(s.stored))
        out.sample("churnwatch_serve_notifications_received_total", [("result", "known")], Double(s.known))
        out.family("churnwatch_serve_applied_total", .counter, "Inbox rows this process applied, by app and outcome.")
        for (app, outcomes) in s.applied.sorted(by: { $0.key < $1.key }) {
            for (o, n) in outcomes.sorted(by: { $0.key < $1.key }) {
                out.sample("churnwatch_serve_applied_total", [("bundle_id", app), ("outcome", o)], Double(n))
            }
        }
        out.family("churnwatch_serve_events_total", .counter, "Churn events this process's applier wrote, by app.")
        for (app, n) in s.events.sorted(by: { $0.key < $1.key }) { out.sample("churnwatch_serve_events_total", [("bundle_id", app)], Double(n)) }
        out.family("churnwatch_serve_inbox_pending", .gauge, "Inbox rows not applied yet, as the applier last saw them.")
        out.sample("churnwatch_serve_inbox_pending", [], Double(s.inboxPending))
        out.family("churnwatch_serve_applier_lag_seconds", .gauge, "Age of the oldest inbox row not applied yet (0: none).")
        out.sample("churnwatch_serve_applier_lag_seconds", [], s.applierLag)
        out.family("churnwatch_serve_applier_errors_total", .counter, "Applier rounds that failed (the database down, ...); retried.")
        out.sample("churnwatch_serve_applier_errors_total", [], Double(s.applierErrors))
        out.family("churnwatch_serve_connections", .gauge, "Connections open now.")
        out.sample("churnwatch_serve_connections", [], Double(door.connections.load(ordering: .relaxed)))
        out.family("churnwatch_serve_connections_refused_total", .counter, "Connections closed at once: the connection cap was reached.")
        out.sample("churnwatch_serve_connections_refused_total", [], Double(door.refused.load(ordering: .relaxed)))
        return out.text
    }
}
