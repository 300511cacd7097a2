import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging

/// What one pass over the open refund requests did.
public struct RefundAnswerSummary: Sendable, Equatable {
    /// Apple accepted the answer (202).
    public var answered = 0
    /// The policy sent nothing: no consent.
    public var noConsent = 0
    /// The deadline passed before an answer went out.
    public var expired = 0
    /// Apple refused the answer for good (a 4xx).
    public var failed = 0
    /// Left pending after a temporary failure (429, 5xx, a timeout, a stop): the next sync tries again.
    public var retried = 0
    /// Answers sent to Apple (whatever came back).
    public var sent = 0
    /// Why the pass stopped before the last open request (a refused key, an untrusted server,
    /// Apple's rate limit, a stop asked for); nil when it went through them all.
    public var stop: RunStop?

    public init() {}

    public var isEmpty: Bool { answered + noConsent + expired + failed + retried == 0 }
}

/// Answers Apple's refund requests (`CONSUMPTION_REQUEST`) that the change feed recorded, by
/// ``RefundAnswerPolicy``: each open request is claimed (a lease, so syncs beside each other
/// never send the same one at once), decided, sent before its deadline and recorded. A sync
/// killed mid-answer leaves its request claimed until the lease runs out; the next sync sends
/// it again (the same body: Apple keeps the last answer per transaction).
public struct RefundAnswerer: Sendable {
    public let client: AppStoreServerAPIClient
    public let store: ChurnStore
    public var policy: RefundAnswerPolicy
    /// Requests claimed at once.
    public var batchSize = 20
    /// How long a claimed request is this process's before another sync may take it over.
    public var lease: TimeInterval = 300
    let logger: Logger

    public init(client: AppStoreServerAPIClient, store: ChurnStore, policy: RefundAnswerPolicy, logger: Logger) {
        self.client = client
        self.store = store
        self.policy = policy
        self.logger = logger
    }

    /// Answers every open request, soonest deadline first. `now` is the time deadlines are
    /// judged by (the run's moment, moving on); `shouldStop` is asked between requests.
    public func answerOpen(now: @Sendable () -> Date, shouldStop: @Sendable () -> RunStop? = { nil }) async throws -> RefundAnswerSummary {
        var summary = RefundAnswerSummary()
        // Each request at most once a pass: one left pending (a 5xx, a timeout) waits for the next sync.
        var tried: [UUID] = []
        while summary.stop == nil {
            let (expired, claimed) = try await store.refundRequestsClaim(now: now(), limit: batchSize, lease: lease, excluding: tried)
            summary.expired += expired
            guard !claimed.isEmpty else { break }
            tried += claimed.map(\.notificationUUID)
            for request in claimed {
                if summary.stop == nil, let asked = shouldStop() { summary.stop = asked }
                if let stop = summary.stop {
                    try await store.refundRequestRecord(request.notificationUUID, attempt: request.attempts,
                                                        .retry(body: nil, branch: nil, error: "not sent: \(stop.reason)"))
                    summary.retried += 1
                    continue
                }
                let (result, stop) = await answer(request, now: now)
                try await store.refundRequestRecord(request.notificationUUID, attempt: request.attempts, result)
                count(result, into: &summary)
                if case .notSent = result {} else { summary.sent += 1 }
                summary.stop = stop
            }
        }
        if !summary.isEmpty {
            logger.info("answered refund requests", metadata: [
                "answered": "\(summary.answered)", "no_consent": "\(summary.noConsent)", "expired": "\(summary.expired)",
                "failed": "\(summary.failed)", "retried": "\(summary.retried)",
            ])
        }
        return summary
    }

    /// One request: the policy's answer, sent when there is one. The second value is why the
    /// pass must stop (``AppleAnswer``: a refused key, an untrusted server, Apple's rate limit);
    /// an outage leaves this request for the next sync and goes on, a failure of the request's
    /// own (4xx, an answer that cannot be read) is recorded as failed.
    func answer(_ request: ClaimedRefundRequest, now: () -> Date) async -> (RefundAttemptResult, RunStop?) {
        let sentAt = now()
        let decided = policy.answer(request.facts, consent: request.consent, now: sentAt)
        guard let body = decided.body else { return (.notSent(decided.branch), nil) }
        let stored = try? StoredJSON(encoding: body)
        let outcome = await client.sendConsumptionInformation(
            transactionId: request.transactionId, body, environment: request.environment,
            timeLeft: request.facts.deadline.timeIntervalSince(sentAt))
        if case .success(let accepted) = outcome {
            return (.answered(body: stored ?? .emptyObject, branch: decided.branch, sentAt: sentAt, status: accepted.status), nil)
        }
        let (reason, failureClass) = AppleAnswer.classify(outcome)
        switch failureClass.scope {
        case .subscription:
            let status: Int? = switch outcome {
            case .badRequest: 400
            case .notFound: 404
            default: nil
            }
            return (.failed(body: stored, branch: decided.branch, status: status, error: reason), nil)
        case .appleUnavailable:
            return (.retry(body: stored, branch: decided.branch, error: reason), nil)
        case .rateLimited, .unauthorized, .untrustedServer:
            return (.retry(body: stored, branch: decided.branch, error: reason), RunStop(failureClass.scope, detail: reason))
        }
    }

    private func count(_ result: RefundAttemptResult, into summary: inout RefundAnswerSummary) {
        switch result {
        case .answered: summary.answered += 1
        case .notSent(.expired): summary.expired += 1
        case .notSent: summary.noConsent += 1
        case .retry: summary.retried += 1
        case .failed: summary.failed += 1
        }
    }
}
