import Foundation
import Synchronization

/// `GET /healthz`: ready when the database answers with this build's migrations applied and
/// the applier's last round worked; otherwise a 503 saying why (answered within its budget).
public final class ServeHealth: Sendable {
    private let check: @Sendable () async throws -> Void
    private let budget: Duration
    private let applierProblem = Mutex<String?>(nil)

    /// - Parameter check: throws one line when the database is down or its schema is not this build's.
    public init(budget: Duration = .seconds(2), check: @escaping @Sendable () async throws -> Void) {
        (self.budget, self.check) = (budget, check)
    }

    /// The applier's last round: nil when it worked, else why not.
    func applier(_ problem: String?) { applierProblem.withLock { $0 = problem } }

    func answer() async -> ServeResponse {
        switch await within(budget, check) {
        case .success?:
            if let problem = applierProblem.withLock({ $0 }) { return .text(503, "applier: \(problem.prefix(300))") }
            return .text(200, "ok")
        case .failure(let error)?:
            return .text(503, "database: \(String(describing: error).prefix(300))")
        case nil:
            return .text(503, "database: no answer within \(budget)")
        }
    }
}

/// The routes of `churnwatch serve` (docs/contracts.md "serve").
public struct ServeService: Sendable {
    public static let notificationsPath = "/apple/notifications"
    public static let retentionPath = "/apple/retention-message"

    let receiver: NotificationReceiver
    let retention: RetentionAnswerer
    let health: ServeHealth
    let metrics: ServeMetrics

    let webhooks: WebhookMetrics?

    public init(receiver: NotificationReceiver, retention: RetentionAnswerer, health: ServeHealth, metrics: ServeMetrics,
                webhooks: WebhookMetrics? = nil) {
        (self.receiver, self.retention, self.health, self.metrics, self.webhooks) = (receiver, retention, health, metrics, webhooks)
    }

    /// Answers `request` and counts it.
    public func handle(_ request: ServeRequest) async -> ServeResponse {
        let started = ContinuousClock.now
        let (route, response) = await answer(request)
        let elapsed = ContinuousClock.now - started
        metrics.request(route: route, status: response.status,
                        seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        return response
    }

    private func answer(_ request: ServeRequest) async -> (String, ServeResponse) {
        let known: [String: String] = [Self.notificationsPath: "POST", Self.retentionPath: "POST", "/healthz": "GET", "/metrics": "GET"]
        guard let method = known[request.path] else { return ("other", .text(404, "no such route")) }
        guard request.method == method else {
            return (request.path, .text(405, "\(request.path) takes \(method)"))
        }
        switch request.path {
        case Self.notificationsPath: return (request.path, await receiver.receive(request.body))
        case Self.retentionPath: return (request.path, await retention.answer(request.body))
        case "/healthz": return (request.path, await health.answer())
        default:
            return (request.path, ServeResponse(status: 200, contentType: "text/plain; version=0.0.4", body: metrics.text + retention.metrics.text + (webhooks?.text ?? "")))
        }
    }
}
