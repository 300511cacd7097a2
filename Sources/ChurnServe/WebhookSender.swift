import ChurnModel
import ChurnStore
import Foundation
import Logging
import Synchronization

/// Delivers webhook messages: numbers what was written, hands ready win-back entries to their
/// campaign's endpoint, leases the head of each subscription's line per endpoint, POSTs it signed,
/// and writes what became of it. Several senders (serve processes, `webhooks send` from cron)
/// share the work: a lease keeps a delivery to one of them at a time, and a line's next
/// delivery waits until its head is delivered or dead (docs/architecture.md "Webhooks").
///
/// Per endpoint, at most its `max_in_flight` requests at once; while it fails, one (the others
/// wait, their attempts not spent); while a Retry-After runs, none. The first 2xx after a
/// failing spell brings its waiting lines forward.
public final class WebhookSender: Sendable {
    public struct Settings: Sendable {
        public var schedule = WebhookSchedule.standard
        /// How long a lease holds: a sender killed mid-attempt leaves its deliveries to others
        /// after this.
        public var lease: TimeInterval = 60
        /// How often an idle sender looks for new messages.
        public var poll: Duration = .milliseconds(100)
        /// The moment win-back entries are due at (`webhooks send --as-of`); nil: now.
        public var winbackAsOf: Date?
        public var name = "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier):\(UInt32.random(in: 0 ... .max))"
        public init() {}
    }

    /// What a sender did, for `webhooks send`'s last line.
    public struct Summary: Sendable, Equatable {
        public var delivered = 0, failed = 0, dead = 0, gone = 0
        /// Stopped while deliveries were still due (`--max-duration`, a stop).
        public var stoppedEarly = false
    }

    struct State {
        var stopping = false
        var inFlight: [String: Int] = [:]
        /// Leased and not yet attempted, per endpoint, with when they were leased.
        var queued: [String: [(delivery: WebhookDelivery, at: ContinuousClock.Instant)]] = [:]
        var finished: [(WebhookSettlement, seconds: Double, sinceWritten: Double?)] = []
        var unsettled: [WebhookSettlement] = []
        /// Endpoints whose last attempt failed (one request at a time) or that asked to wait.
        var failing: Set<String> = []
        var pausedUntil: [String: Date] = [:]
        var summary = Summary()
    }

    let store: DatabaseStore
    let http: WebhookHTTP
    let metrics: WebhookMetrics
    let settings: Settings
    let logger: Logger
    let winbackBody: (@Sendable (WinbackQueueEntry) throws -> String)?
    let state = Mutex(State())
    let wake = Wakeup()
    let endpoints = Mutex<(at: ContinuousClock.Instant?, list: [WebhookEndpoint], keys: [String: WebhookSecrets])>((nil, [], [:]))

    /// - Parameter winbackBody: renders a winback.ready message with its offer signed now; nil
    ///   when this process cannot sign (no campaign consumer is served then).
    public init(store: DatabaseStore, http: WebhookHTTP, metrics: WebhookMetrics, settings: Settings = Settings(), logger: Logger,
                winbackBody: (@Sendable (WinbackQueueEntry) throws -> String)?) {
        (self.store, self.http, self.metrics, self.settings, self.logger, self.winbackBody) = (store, http, metrics, settings, logger, winbackBody)
    }

    /// Ends `run` after the attempts in flight (each bounded by the HTTP timeout).
    public func stop() {
        state.withLock { $0.stopping = true }
        wake.signal()
    }

    /// Sends until stopped, until `deadline`, or (`untilIdle`) until a pass finds nothing due
    /// and nothing in flight. Database failures are logged and retried; nothing is lost (a
    /// delivery not settled is sent again after its lease).
    public func run(untilIdle: Bool = false, deadline: ContinuousClock.Instant? = nil) async -> Summary {
        var instance: String?
        var lastPump = ContinuousClock.now - .seconds(10), lastLook = ContinuousClock.now - .seconds(10)
        var lastNumbering = ContinuousClock.now - .seconds(10), numberedLast = false
        var failureLogged: ContinuousClock.Instant?
        while !state.withLock({ $0.stopping }) {
            if let deadline, ContinuousClock.now >= deadline {
                state.withLock { $0.summary.stoppedEarly = true }
                break
            }
            do {
                if instance == nil { instance = try await store.webhookInstance() }
                // Busy: new work was found (numbered, handed to a consumer, leased): look again at
                // once. Attempts that end wake the loop; what they found is written each pass.
                var busy = false
                try await settleFinished()
                if try await currentEndpoints().0.isEmpty, state.withLock({ $0.inFlight.values.reduce(0, +) == 0 }) {
                    // No endpoint: no message is written; look again in a second.
                    if untilIdle { break }
                    await wake.wait(timeout: .seconds(1))
                    continue
                }
                if numberedLast || ContinuousClock.now - lastNumbering >= .milliseconds(50) {
                    lastNumbering = ContinuousClock.now
                    numberedLast = try await store.webhookSequence() > 0
                    busy = numberedLast || busy
                }
                if winbackBody != nil, ContinuousClock.now - lastPump >= .seconds(1) {
                    lastPump = ContinuousClock.now
                    // What it wrote is numbered on the next pass, unthrottled.
                    if try await pumpWinback() > 0 { (busy, numberedLast) = (true, true) }
                }
                busy = try await launch(instance: instance ?? "00000000") > 0 || busy
                if ContinuousClock.now - lastLook >= .seconds(5) {
                    lastLook = ContinuousClock.now
                    metrics.saw(try await store.webhookStats(delivered: false), unsequenced: try await store.webhookUnsequenced(), at: Date())
                }
                if !busy, untilIdle, state.withLock({ $0.inFlight.values.reduce(0, +) == 0 && $0.queued.values.allSatisfy(\.isEmpty) && $0.finished.isEmpty && $0.unsettled.isEmpty }) { break }
                if busy { continue }
                failureLogged = nil
            } catch {
                if failureLogged.map({ ContinuousClock.now - $0 > .seconds(60) }) ?? true {
                    logger.error("webhooks: the database failed; retrying every second: \(error)")
                    failureLogged = ContinuousClock.now
                }
                await wake.wait(timeout: .seconds(1))
                continue
            }
            await wake.wait(timeout: settings.poll)
            // Woken by an attempt's end: a moment for the others in flight to end too, so they
            // are written in one statement.
            if state.withLock({ $0.inFlight.values.reduce(0, +) > 0 }) { try? await Task.sleep(for: .milliseconds(3)) }
        }
        await drain()
        return state.withLock { $0.summary }
    }

    /// After the stop: waits for the attempts in flight, writes what they found, gives back
    /// any lease not attempted.
    private func drain() async {
        while state.withLock({ $0.inFlight.values.reduce(0, +) > 0 }) {
            await wake.wait(timeout: .milliseconds(50))
        }
        for _ in 0..<3 {
            guard (try? await settleFinished()) != nil else { continue }
            break
        }
        try? await store.webhookRelease(sender: settings.name)
    }

    private func pumpWinback() async throws -> Int {
        guard let body = winbackBody else { return 0 }
        return try await store.webhookWinbackReady(now: settings.winbackAsOf ?? Date(), body: body)
    }

    /// Leases what each endpoint has room for (up to four times its cap, held in a local queue,
    /// so a claim serves several rounds of attempts) and starts the attempts it has room for;
    /// returns how many it leased.
    private func launch(instance: String) async throws -> Int {
        let (list, keys) = try await currentEndpoints()
        var busy = 0
        for endpoint in list {
            guard let secrets = keys[endpoint.name] else { continue }
            // Paused (a Retry-After): what it holds goes back, for whoever sends when it is over.
            let parked = state.withLock { s -> [Int64] in
                guard (s.pausedUntil[endpoint.name] ?? .distantPast) > Date() else { return [] }
                defer { s.queued[endpoint.name] = [] }
                return s.queued[endpoint.name, default: []].map(\.delivery.messageId)
            }
            if !parked.isEmpty { try await store.webhookRelease(sender: settings.name, endpoint: endpoint.name, messageIds: parked) }
            let want = state.withLock { s -> Int in
                guard (s.pausedUntil[endpoint.name] ?? .distantPast) <= Date() else { return 0 }
                let failing = s.failing.contains(endpoint.name)
                let queued = s.queued[endpoint.name, default: []].count
                // Refilled when less than a round is left, to four rounds.
                guard queued < (failing ? 1 : endpoint.maxInFlight) else { return 0 }
                return (failing ? 1 : 4 * endpoint.maxInFlight) - s.inFlight[endpoint.name, default: 0] - queued
            }
            if want > 0 {
                let claimed = try await store.webhookClaim(endpoint: endpoint.name, limit: want, lease: settings.lease, sender: settings.name)
                let at = ContinuousClock.now
                state.withLock { $0.queued[endpoint.name, default: []] += claimed.map { ($0, at) } }
                busy += claimed.count
            }
            _ = start(endpoint, secrets: secrets, instance: instance)
        }
        return busy
    }

    /// Starts queued attempts while the endpoint has room. A delivery queued for more than half
    /// its lease is not sent: its lease may lapse before the attempt ends, and another sender
    /// may take it (it is sent then, by whoever holds it).
    private func start(_ endpoint: WebhookEndpoint, secrets: WebhookSecrets, instance: String) -> Int {
        let fresh = ContinuousClock.now - .milliseconds(Int64(settings.lease * 500))
        let ready = state.withLock { s -> [WebhookDelivery] in
            guard (s.pausedUntil[endpoint.name] ?? .distantPast) <= Date() else { return [] }
            let cap = s.failing.contains(endpoint.name) ? 1 : endpoint.maxInFlight
            var queue = s.queued[endpoint.name, default: []].filter { $0.at > fresh }
            let n = max(0, min(queue.count, cap - s.inFlight[endpoint.name, default: 0]))
            let out = queue.prefix(n).map(\.delivery)
            queue.removeFirst(n)
            s.queued[endpoint.name] = queue
            s.inFlight[endpoint.name, default: 0] += n
            return out
        }
        for delivery in ready {
            let id = "msg_\(instance)_\(delivery.seq)"
            Task { await self.attempt(delivery, id: id, endpoint: endpoint, secrets: secrets) }
        }
        return ready.count
    }

    private func attempt(_ delivery: WebhookDelivery, id: String, endpoint: WebhookEndpoint, secrets: WebhookSecrets) async {
        let now = Date()
        let timestamp = Int64(now.timeIntervalSince1970)
        let keys = ([secrets.current] + [secrets.previous].compactMap { $0 }).compactMap(WebhookSigning.key)
        let signature = WebhookSigning.signature(id: id, timestamp: timestamp, body: delivery.body, keys: keys)
        let answer = await http.post(url: endpoint.url, allowPrivate: endpoint.allowPrivate, id: id, timestamp: timestamp,
                                     body: delivery.body, signature: signature)
        let outcome = WebhookOutcome.classify(status: answer.status, retryAfter: answer.retryAfter, now: Date())
        let next = WebhookNext.after(outcome, failedBefore: delivery.attempts, schedule: settings.schedule, draw: Double.random(in: 0..<1))
        let settlement = WebhookSettlement(endpoint: endpoint.name, messageId: delivery.messageId, winbackId: delivery.winbackId,
                                           result: next, status: answer.status, error: answer.error)
        let since = next == .delivered ? Date().timeIntervalSince(delivery.createdAt) : nil
        metrics.attempt(endpoint: endpoint.name, next: next, seconds: answer.seconds, sinceWritten: since)
        noteHealth(endpoint.name, next: next, error: answer.error, delivery: delivery, id: id)
        state.withLock { s in
            s.inFlight[endpoint.name, default: 1] -= 1
            s.finished.append((settlement, answer.seconds, since))
        }
        wake.signal()
    }

    /// The sender's own view of an endpoint's health, ahead of the database's, and the log
    /// lines an operator needs: a failing spell's start and end, a dead delivery, a 410.
    private func noteHealth(_ endpoint: String, next: WebhookNext, error: String?, delivery: WebhookDelivery, id: String) {
        let wasFailing = state.withLock { s -> Bool in
            let was = s.failing.contains(endpoint)
            switch next {
            case .delivered: s.failing.remove(endpoint); s.pausedUntil[endpoint] = nil; s.summary.delivered += 1
            case .retry(_, let pause):
                s.failing.insert(endpoint); s.summary.failed += 1
                if let pause { s.pausedUntil[endpoint] = Date().addingTimeInterval(pause) }
            case .dead: s.failing.insert(endpoint); s.summary.dead += 1
            case .gone: s.summary.gone += 1; s.pausedUntil[endpoint] = .distantFuture  // disabled: nothing more until enabled
            case .released: break
            }
            return was
        }
        let meta: Logger.Metadata = ["endpoint": "\(endpoint)", "webhook_id": "\(id)", "type": "\(delivery.type)"]
        switch next {
        case .delivered where wasFailing: logger.info("webhook endpoint answers again; its waiting messages go now", metadata: meta)
        case .retry where !wasFailing: logger.warning("webhook endpoint failing: \(error ?? "?"); retrying by the schedule", metadata: meta)
        case .dead: logger.error("webhook delivery dead after \(delivery.attempts + 1) attempts: \(error ?? "?"); `churnwatch webhooks replay` sends it again", metadata: meta)
        case .gone: logger.error("webhook endpoint answered 410 Gone: disabled (`churnwatch webhooks enable` after fixing it)", metadata: meta)
        default: break
        }
    }

    /// Writes the attempts that ended since the last call (and any a failed write left).
    @discardableResult
    private func settleFinished() async throws -> Bool {
        let batch = state.withLock { s -> [WebhookSettlement] in
            let out = s.unsettled + s.finished.map(\.0)
            (s.unsettled, s.finished) = ([], [])
            return out
        }
        guard !batch.isEmpty else { return false }
        do {
            try await store.webhookSettle(batch)
        } catch {
            state.withLock { $0.unsettled = batch + $0.unsettled }
            throw error
        }
        return true
    }

    /// The enabled endpoints and their secrets, read again every second.
    private func currentEndpoints() async throws -> ([WebhookEndpoint], [String: WebhookSecrets]) {
        let now = ContinuousClock.now
        if let cached = endpoints.withLock({ e in e.at.map { now - $0 < .seconds(1) } == true ? (e.list, e.keys) : nil }) { return cached }
        let list = try await store.webhookEndpoints(enabledOnly: true)
        var keys: [String: WebhookSecrets] = [:]
        for endpoint in list { keys[endpoint.name] = try await store.webhookSecrets(endpoint.name) }
        state.withLock { s in
            for endpoint in list {
                // Listed, so enabled: a 410 this process saw was answered by enabling it again.
                if s.pausedUntil[endpoint.name] == .distantFuture { s.pausedUntil[endpoint.name] = nil }
                if endpoint.consecutiveFailures > 0 { s.failing.insert(endpoint.name) }
                if let until = endpoint.pausedUntil, until > Date() { s.pausedUntil[endpoint.name] = until }
            }
        }
        endpoints.withLock { $0 = (now, list, keys) }
        return (list, keys)
    }
}
