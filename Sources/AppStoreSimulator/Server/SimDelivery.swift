import AsyncHTTPClient
import Foundation
import NIOCore
import Synchronization

/// Where and how the simulator delivers notifications as Apple does (`serve --notification-url`).
public struct DeliveryOptions: Sendable {
    /// The notification URL of every app in Production, and in Sandbox (default: the same).
    public var production: String?
    public var sandbox: String?
    /// Share of delivery attempts not made (recorded as failed, then retried on Apple's
    /// schedule), drawn per attempt from the seed: the history sync is the net for them.
    public var dropShare = 0.0
    /// How long one attempt may take before it counts as `TIMED_OUT`.
    public var timeout: TimeAmount = .seconds(5)
    /// Attempts in flight at once.
    public var concurrency = 16
    /// Notifications signed up to this moment (ms) are history, never delivered (default: the
    /// clock when delivery starts): as Apple, which sends what happens after the URL is set.
    public var after: Int64?

    public init() {}

    func url(sandbox: Bool) -> String? { sandbox ? (self.sandbox ?? production) : production }
}

/// Delivers each notification of every app to its URL when the simulated clock passes its
/// `signedDate`, as Apple does: a POST of `{"signedPayload": ...}`; anything but 200-206 is a
/// failure, retried in Production 1, 12, 24, 48 and 72 hours after the attempt before (simulated
/// time: `--speed` compresses it), once only in Sandbox. Every attempt is recorded and shown
/// in the notification history's `sendAttempts`. Notifications signed before the deliverer
/// started are history, not delivered.
public final class SimDelivery: Sendable {
    struct Due: Sendable {
        var app: Int
        var entry: NotificationIndex.Entry
        /// 0 for the first attempt, then 1...5.
        var attempt: Int
        var at: Int64
    }

    struct State {
        /// Per app: every notification signed up to here was handed to delivery.
        var cursors: [Int64]
        var retries: [Due] = []
        /// Per app: the attempts made, by subscriber and change.
        var attempts: [[UInt64: [SimSendAttempt]]]
        var delivered = 0
        var failed = 0
        /// A batch of attempts is being made.
        var busy = false
    }

    private let apps: [SimApp]
    private let clock: SimClock
    private let options: DeliveryOptions
    /// The notification URLs (Production, Sandbox: nil for Production's), set at start and by
    /// `POST /_sim/deliveries/url` (a test starts its receiver on a free port after the simulator).
    private let urls: Mutex<(production: String?, sandbox: String?)>
    private let client: HTTPClient
    private let state: Mutex<State>
    /// The simulated moment delivery started: what was signed before is history.
    private let startedAt: Int64

    public init(apps: [SimApp], clock: SimClock, options: DeliveryOptions) {
        (self.apps, self.clock, self.options) = (apps, clock, options)
        urls = Mutex((options.production, options.sandbox))
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(timeout: .init(connect: .seconds(2), read: options.timeout)))
        let now = max(clock.now(), options.after ?? .min)
        startedAt = now
        state = Mutex(State(cursors: apps.map { _ in now }, attempts: apps.map { _ in [:] }))
        for app in apps { app.delivery.withLock { $0 = self } }
    }

    /// Delivers until the task is cancelled, looking at the clock every `tick`.
    public func run(tick: Duration = .milliseconds(20)) async {
        while !Task.isCancelled {
            await deliverDue()
            try? await Task.sleep(for: tick)
        }
        try? await client.shutdown()
    }

    /// (delivered, failed) attempts so far.
    public var counts: (delivered: Int, failed: Int) { state.withLock { ($0.delivered, $0.failed) } }

    /// `GET /_sim/deliveries` of `app`: the attempts so far, whether everything due by the clock
    /// was attempted (`idle`; retries due later wait for the clock), and the UUIDs of the
    /// notifications delivered (a 200-206 answer).
    func report(_ app: SimApp) -> SimResponse {
        let now = clock.now()
        guard let a = apps.firstIndex(where: { $0 === app }) else { return .json(404, Array("{}".utf8)) }
        let (attempts, idle) = state.withLock { s in
            (s.attempts[a], !s.busy && s.cursors.allSatisfy { $0 >= now } && !s.retries.contains { $0.at <= now })
        }
        var w = JSONWriter()
        w.beginObject()
        w.bool("idle", idle)
        w.int("attempts", Int64(attempts.values.reduce(0) { $0 + $1.count }))
        w.int("failed", Int64(attempts.values.reduce(0) { $0 + $1.filter { $0.result != "SUCCESS" }.count }))
        w.beginArray("delivered")
        for (key, list) in attempts.sorted(by: { $0.key < $1.key }) where list.contains(where: { $0.result == "SUCCESS" }) {
            w.string(nil, app.population.notificationUUID(Int(key >> 32), Int(key & 0xFFFF_FFFF)))
        }
        w.endArray()
        w.endObject()
        return .json(200, w.bytes)
    }

    /// The attempts recorded for change `k` of subscription `i` of `app` (empty while none was
    /// made); nil when it was signed before delivery started (the history shows the computed ones).
    func attempts(_ app: SimApp, _ i: Int, _ k: Int) -> [SimSendAttempt]? {
        guard let a = apps.firstIndex(where: { $0 === app }), app.population.notification(i, k).time > startedAt else { return nil }
        return state.withLock { $0.attempts[a][Self.key(i, k)] ?? [] }
    }

    static func key(_ i: Int, _ k: Int) -> UInt64 { UInt64(i) << 32 | UInt64(k) }

    /// Everything due now: new notifications (in `signedDate` order) and retries whose hour came.
    func deliverDue() async {
        let now = clock.now()
        let due: [Due] = state.withLock { s in
            var out: [Due] = []
            for (a, app) in apps.enumerated() where now > s.cursors[a] {
                let entries = app.notificationIndex.entries
                let from = NotificationIndex.lowerBound(entries, .init(time: s.cursors[a] + 1, subscriber: 0, index: 0))
                let to = NotificationIndex.lowerBound(entries, .init(time: now + 1, subscriber: 0, index: 0))
                for e in entries[from..<to] { out.append(Due(app: a, entry: e, attempt: 0, at: e.time)) }
                s.cursors[a] = now
            }
            let ready = s.retries.filter { $0.at <= now }
            s.retries.removeAll { $0.at <= now }
            s.busy = !(out.isEmpty && ready.isEmpty)
            return out + ready.sorted { $0.at < $1.at }
        }
        guard !due.isEmpty else { return }
        defer { state.withLock { $0.busy = false } }
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for d in due {
                if running >= options.concurrency {
                    await group.next()
                    running -= 1
                }
                group.addTask { await self.attempt(d) }
                running += 1
            }
        }
    }

    /// Every app's notification URL from now on, in Production and (unless set apart at start)
    /// Sandbox; with `sandbox`, Sandbox's alone.
    func setURL(_ url: String, sandbox: Bool) {
        urls.withLock { u in
            if sandbox { u.sandbox = url } else { u.production = url }
        }
    }

    /// One attempt: made (or dropped), recorded, and retried on Apple's schedule when it failed.
    private func attempt(_ d: Due) async {
        let app = apps[d.app]
        let (i, k) = (Int(d.entry.subscriber), Int(d.entry.index))
        let sandbox = app.population.isSandbox(i)
        var result = "SUCCESS"
        var r = SimRandom(app.population.config.seed, UInt64(i), UInt64(k), 44 + UInt64(d.attempt))
        if options.dropShare > 0, r.chance(options.dropShare) {
            result = "NO_RESPONSE"
        } else if let url = urls.withLock({ sandbox ? ($0.sandbox ?? $0.production) : $0.production }) {
            result = await post(url, app.signedNotification(i, k))
        }
        let at = clock.now()
        state.withLock { s in
            s.attempts[d.app][Self.key(i, k), default: []].append(SimSendAttempt(date: at, result: result))
            if result == "SUCCESS" { s.delivered += 1 } else { s.failed += 1 }
            if result != "SUCCESS", !sandbox, d.attempt < NotificationTypes.retryHours.count {
                s.retries.append(Due(app: d.app, entry: d.entry, attempt: d.attempt + 1,
                                     at: at + NotificationTypes.retryHours[d.attempt] * SimTime.hour))
            }
        }
    }

    /// POSTs one notification; Apple's `sendAttemptResult` for what happened.
    private func post(_ url: String, _ signedPayload: String) async -> String {
        do {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(signedPayload)\"}"))
            let response = try await client.execute(request, timeout: options.timeout)
            _ = try? await response.body.collect(upTo: 1 << 16)
            return (200...206).contains(Int(response.status.code)) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            return "TIMED_OUT"
        } catch {
            return "\(error)".lowercased().contains("refused") ? "NO_RESPONSE" : "SOCKET_ISSUE"
        }
    }
}
