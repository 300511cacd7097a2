import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Synchronization

/// `POST /apple/retention-message`: Apple's Get Retention Message request, the moment a customer
/// opens the subscription's page where Cancel is. Verified, then answered within `budget` with
/// what the rules choose (docs/contracts.md "The cancel page"), from what the database knows of the
/// subscriber when it answers in time and from the cached rules alone when not; recorded, and
/// logged as a `cancel_page_viewed` event.
public final class RetentionAnswerer: Sendable {
    public struct Settings: Sendable {
        /// The whole answer, verification included (Apple waits about 700 ms, then shows the default).
        public var budget: Duration = .milliseconds(300)
        /// How far `signedDate` may be from now, either way; beyond, the request is refused as
        /// stale. nil: not checked (a simulated App Store whose clock is not the wall's).
        public var maxSkew: Duration? = .seconds(300)
        public init() {}
    }

    private let doors: @Sendable (Int64) async -> AppLookup<RetentionDoor>
    private let settings: Settings
    let metrics: RetentionMetrics
    private let recorder: RetentionRecorder
    private let breaker = DatabaseBreaker()
    private let recent = RecentAnswers(capacity: 10_000)
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let appleDoor: AppleDoor

    /// - Parameter doors: the app whose app Apple id a request names.
    public init(settings: Settings, metrics: RetentionMetrics, logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
                doors: @escaping @Sendable (Int64) async -> AppLookup<RetentionDoor>) {
        (self.settings, self.metrics, self.logger, self.now, self.doors) = (settings, metrics, logger, now, doors)
        recorder = RetentionRecorder(metrics: metrics)
        appleDoor = AppleDoor(noun: "request", logger: logger) { metrics.rejected($0) }
    }

    /// At shutdown: returns once every answered request is recorded (the caller bounds the wait:
    /// with the database down it does not end).
    public func flush() async {
        await recorder.idle()
    }

    /// The app Apple id a payload claims, read before verification only to choose whose verifier to ask.
    static func claim(_ signedPayload: String) -> ClaimRead<Int64> {
        struct Claim: Decodable { var appAppleId: Int64? }
        let parts = signedPayload.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(String(parts[1])),
              let claim = try? JSONDecoder().decode(Claim.self, from: Data(data)) else { return .unreadable }
        return claim.appAppleId.map { .names($0) } ?? .none
    }

    public func answer(_ body: [UInt8]) async -> ServeResponse {
        let started = ContinuousClock.now
        let doors = self.doors
        let (payload, door): (String, RetentionDoor)
        switch await appleDoor.admit(body, claim: Self.claim, find: { await doors($0) }) {
        case .failure(let refusal): return refusal.response
        case .success(let found): (payload, door) = found
        }
        let request: DecodedRealtimeRequestBody
        do throws(JWSVerificationFailure) {
            request = try await door.client.verifyRealtimeRequest(payload, alsoSandbox: door.alsoSandbox)
        } catch {
            return refuse("verification", 403, "the request did not verify: \(String(describing: error).prefix(300))")
        }
        let signedAt = Date(timeIntervalSince1970: Double(request.signedDate.rawValue) / 1000)
        let skew = abs(signedAt.timeIntervalSince(now()))
        if let maxSkew = settings.maxSkew, skew > Double(maxSkew.components.seconds) {
            return refuse("stale", 403, "the request was signed \(Int(skew)) s from now: more than \(maxSkew) (a replay, or a clock far off)")
        }
        guard let requestId = UUID(uuidString: request.requestIdentifier) else {
            return refuse("verification", 403, "the request's requestIdentifier is not a UUID")
        }
        if let earlier = recent.get(requestId) { return earlier }
        let lookup = await self.lookup(door, request, requestId, until: started + settings.budget * 0.4)
        if let lookup, lookup.seenBefore {
            let response = Self.response(lookup.earlierAnswer)
            recent.put(requestId, response)
            return response
        }
        if let lookup, !door.isCurrent(lookup.rulesVersion) {
            // The rules changed since they were read: read them now, within the budget left.
            _ = await within(started + settings.budget * 0.7 - .now) { try await door.load() }
        }
        return choose(door, request, requestId, signedAt: signedAt, lookup: lookup)
    }

    /// What the database knows, within the time left; nil when it did not answer (or is known down).
    private func lookup(_ door: RetentionDoor, _ request: DecodedRealtimeRequestBody, _ id: UUID,
                        until: ContinuousClock.Instant) async -> RetentionLookup? {
        guard breaker.shouldTry() else { return nil }
        let store = door.store, otid = request.originalTransactionId
        switch await within(until - .now, { try await store.retentionLookup(originalTransactionId: otid, requestIdentifier: id) }) {
        case .success(let found)?:
            breaker.succeeded()
            return found
        case .failure?:
            // Down (refused, lost): the next second's requests answer without asking.
            breaker.failed()
            return nil
        case nil:
            // Slow, not down: this answer goes without the facts, the next asks again (a probe
            // that was slow keeps the breaker open for another second).
            breaker.slow()
            return nil
        }
    }

    private func choose(_ door: RetentionDoor, _ request: DecodedRealtimeRequestBody, _ id: UUID, signedAt: Date,
                        lookup: RetentionLookup?) -> ServeResponse {
        let facts = RetentionFacts(
            productId: request.productId, userLocale: request.userLocale, subscriptionGroupId: lookup?.subscriptionGroupId,
            segment: lookup?.segment,
            tenureDays: lookup?.originalPurchase.map { Int(signedAt.timeIntervalSince($0) / 86_400) },
            requestedAt: signedAt, lastView: lookup?.lastCancelPageViewAt, viewsKnown: lookup != nil)
        let (rules, defaults, experiments) = door.rules()
        let otid = request.originalTransactionId
        let choice = RetentionChoice.choose(rules: rules, defaults: defaults, facts: facts, draw: RetentionDraw.draw(otid),
                                            experiments: experiments, armDraw: { ExperimentDraw.draw(otid, experiment: $0) },
                                            recorded: lookup?.assignments ?? [:])
        let body = answerBody(choice, door: door, request: request)
        let text = body.flatMap { try? String(decoding: JSONEncoder().encode($0), as: UTF8.self) }
        let kind = choice.arm == .treated ? choice.answer?.kind : nil
        metrics.answered(app: door.store.app, arm: choice.arm, kind: kind?.rawValue ?? (text == nil ? "none" : "default"),
                         factsKnown: lookup != nil)
        let record = RetentionRequestRecord(
            requestIdentifier: id, originalTransactionId: request.originalTransactionId, productId: request.productId,
            userLocale: request.userLocale, environment: request.rawEnvironment, signedAt: signedAt, arm: choice.arm,
            ruleName: choice.rule?.name, ruleKind: choice.rule?.kind, answerKind: kind, messageId: body?.messageIdentifier, segment: facts.segment,
            tenureDays: facts.tenureDays, periodEndsAt: lookup?.periodEndsAt, factsKnown: lookup != nil, answer: text,
            experiment: choice.experiment, experimentArm: choice.assignment?.arm, experimentPeriod: choice.assignment?.period)
        // The answer does not wait for its record (Apple waits for the answer, not for our
        // bookkeeping): it is committed moments later with the others (group commit).
        recorder.submit(record, in: door.store)
        let response = Self.response(text)
        recent.put(id, response)
        return response
    }

    /// The body: the rule's answer when treated, else the default message (nil when none is known).
    private func answerBody(_ choice: RetentionChoice, door: RetentionDoor, request: DecodedRealtimeRequestBody) -> RealtimeResponseBody? {
        guard choice.arm == .treated, let rule = choice.answer else {
            return choice.defaultMessageId.map { RealtimeResponseBody(message: .init(messageIdentifier: $0)) }
        }
        switch rule.kind {
        case .message:
            return RealtimeResponseBody(message: .init(messageIdentifier: rule.messageId))
        case .alternateProduct:
            return RealtimeResponseBody(alternateProduct: .init(messageIdentifier: rule.messageId, productId: rule.alternateProductId ?? "",
                                                                billingPlanType: rule.billingPlanType))
        case .promotionalOffer:
            do {
                let signed = try door.signer.sign(productId: request.productId, offerId: rule.offerId ?? "", appAccountToken: nil,
                                                  transactionId: request.originalTransactionId, now: now())
                return RealtimeResponseBody(promotionalOffer: .init(messageIdentifier: rule.messageId, promotionalOfferSignatureV2: signed.jws))
            } catch {
                logger.error("a promotional offer could not be signed: the default message answered", metadata: ["error": "\(error)"])
                return choice.defaultMessageId.map { RealtimeResponseBody(message: .init(messageIdentifier: $0)) }
            }
        }
    }

    /// 200 with the body; 204 when there is none (no default known: Apple shows its own).
    static func response(_ text: String?) -> ServeResponse {
        guard let text else { return ServeResponse(status: 204, body: "") }
        return ServeResponse(status: 200, contentType: "application/json", body: text)
    }

    private func refuse(_ reason: String, _ status: Int, _ why: String) -> ServeResponse {
        appleDoor.refuse(reason, status, why).response
    }
}

/// The answers given lately, by request (Apple's retry of a request is answered the same at once).
final class RecentAnswers: Sendable {
    private let state = Mutex<[UUID: ServeResponse]>([:])
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    func get(_ id: UUID) -> ServeResponse? { state.withLock { $0[id] } }

    func put(_ id: UUID, _ response: ServeResponse) {
        state.withLock { s in
            if s.count >= capacity { s.removeAll(keepingCapacity: true) }
            s[id] = response
        }
    }
}
