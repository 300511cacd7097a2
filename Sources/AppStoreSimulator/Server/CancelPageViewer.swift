import AppStoreModels
import AsyncHTTPClient
import Foundation
import Synchronization

/// One cancel-page view as it happened.
struct CancelPageRecord: Sendable {
    var view: CancelPagePlan.View
    var product: Int
    var locale: String
    /// A real-time request was sent (a URL was set for the environment).
    var posted: Bool
    var httpStatus: Int?
    var latencyMs: Int64?
    var judgement: CancelPageJudgement
    var averted: Bool
    /// The view's potential outcomes, before its own answer was applied.
    var potential: CancelPagePotential
}

/// The simulated customers' cancel page (docs/simulator.md, "The cancel page (Retention
/// Messaging)"): when the clock passes a view of the ``CancelPagePlan``, a POST of the signed
/// `DecodedRealtimeRequestBody` to the Get Retention Message URL of the subscription's
/// environment (one attempt, ``RetentionOptions/timeoutMs``), the answer judged as the App Store
/// does (``SimApp/judge(_:product:locale:at:)``), and for a customer who came to cancel and was
/// shown a non-default answer, the cancellation averted with the probability of that answer
/// (``CancelPageEffect/probability(_:catalog:)``); each view's potential outcomes
/// (``CancelPagePotential``) recorded first.
///
/// Views must be decided before anything that follows from them is served or delivered, so
/// while views with a URL are due and not yet decided, the clock every app reads stops just
/// before the first of them (``SimClock/setHold(_:)``); it moves on when they are.
public final class CancelPageViewer: Sendable {
    struct State {
        /// Every view up to here was decided.
        var cursor: Int64
        /// Per app, in view order.
        var records: [[CancelPageRecord]]
        var busy = false
        var closed = false
        /// Waiting for the batch in progress to end.
        var batchWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let apps: [SimApp]
    private let plans: [CancelPagePlan]
    private let clock: SimClock
    private let options: RetentionOptions
    private let client: HTTPClient
    private let state: Mutex<State>

    /// Draws every app's views (``SimulatorOptions/retention``); those before the clock's now are history.
    public init(service: SimulatorService) {
        let options = service.options.retention
        apps = service.apps
        clock = service.clock
        self.options = options
        plans = service.apps.map { CancelPagePlan($0.population, share: options.cancelPageShare, browsePer30Days: options.browsePer30Days) }
        client = RealtimeHTTP.client(connections: options.concurrency)
        state = Mutex(State(cursor: service.clock.now(), records: service.apps.map { _ in [] }))
        for app in apps { app.viewer.withLock { $0 = self } }
        refreshBarrier()
    }

    /// Decides views until the task is cancelled, looking at the clock every `tick`; then ``shutdown()``.
    public func run(tick: Duration = .milliseconds(20)) async {
        while !Task.isCancelled {
            await processDue()
            try? await Task.sleep(for: tick)
        }
        await shutdown()
    }

    /// Stops deciding views and releases the clock.
    public func shutdown() async {
        let (first, waiters) = state.withLock { s in
            let first = !s.closed
            s.closed = true
            defer { s.batchWaiters = [] }
            return (first, s.batchWaiters)
        }
        clock.setHold(.max)
        for w in waiters { w.resume() }
        if first { try? await client.shutdown() }
    }

    /// The moment up to which every view was decided.
    var processedUntil: Int64 { state.withLock { $0.cursor } }

    /// The views of `app` decided so far, in order.
    func records(of app: SimApp) -> [CancelPageRecord] {
        guard let a = apps.firstIndex(where: { $0 === app }) else { return [] }
        return state.withLock { $0.records[a] }
    }

    /// Holds the clock just before the first view not yet decided that goes to a URL (none: no hold).
    func refreshBarrier() {
        state.withLock { s in
            var hold = Int64.max
            if !s.closed {
                for (a, app) in apps.enumerated() {
                    for env in [SimEnvironment.production, .sandbox] {
                        guard let u = app.messaging.url(env),
                              let t = plans[a].first(after: max(s.cursor, u.since), sandbox: env == .sandbox) else { continue }
                        hold = min(hold, t - 1)
                    }
                }
            }
            clock.setHold(hold)
        }
    }

    /// Decides every view the clock (without its hold) has passed; false when a batch was
    /// already in progress (or the viewer is shut down), and nothing was done.
    @discardableResult
    func processDue() async -> Bool {
        let raw = clock.rawNow()
        let from = state.withLock { s -> Int64? in
            guard !s.busy, !s.closed else { return nil }
            s.busy = true
            return s.cursor
        }
        guard let from else { return false }
        if raw > from {
            let batch = apps.indices.flatMap { a in plans[a].due(after: from, through: raw).map { (app: a, view: $0) } }
            let decided = await decide(batch)
            state.withLock { s in
                for (a, list) in decided { s.records[a] += list.sorted { $0.view < $1.view } }
            }
        }
        let waiters = state.withLock { s in
            s.cursor = max(s.cursor, raw)
            s.busy = false
            defer { s.batchWaiters = [] }
            return s.batchWaiters
        }
        refreshBarrier()
        for w in waiters { w.resume() }
        return true
    }

    /// Returns when every view up to `t` (or the clock, if it was set back below `t`) is decided.
    func catchUp(to t: Int64) async {
        while state.withLock({ !$0.closed && $0.cursor < min(t, clock.rawNow()) }) {
            if await processDue() { continue }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { s -> Bool in
                    guard s.busy, !s.closed else { return false }
                    s.batchWaiters.append(c)
                    return true
                }
                if !waiting { c.resume() }
            }
        }
    }

    /// A batch: each subscription's views in order, subscriptions side by side (at most
    /// ``RetentionOptions/concurrency`` requests in flight). Per app, the views that happened.
    private func decide(_ batch: [(app: Int, view: CancelPagePlan.View)]) async -> [Int: [CancelPageRecord]] {
        var order: [UInt64] = []
        var groups: [UInt64: [(app: Int, view: CancelPagePlan.View)]] = [:]
        for item in batch {
            let key = UInt64(item.app) << 32 | UInt64(item.view.subscriber)
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(item)
        }
        return await withTaskGroup(of: (Int, [CancelPageRecord]).self) { group in
            var out: [Int: [CancelPageRecord]] = [:]
            var running = 0
            for key in order {
                let items = groups[key] ?? []
                if running >= max(1, options.concurrency), let done = await group.next() {
                    out[done.0, default: []] += done.1
                    running -= 1
                }
                group.addTask {
                    var list: [CancelPageRecord] = []
                    for item in items {
                        if let r = await self.decide(item.app, item.view) { list.append(r) }
                    }
                    return (items[0].app, list)
                }
                running += 1
            }
            for await (a, list) in group { out[a, default: []] += list }
            return out
        }
    }

    /// One view: whether it still happens, the request and its answer, what was shown, the effect.
    private func decide(_ a: Int, _ v: CancelPagePlan.View) async -> CancelPageRecord? {
        let app = apps[a], population = app.population, i = Int(v.subscriber)
        let s = population.state(i, at: v.time)
        guard s.exists, s.status == 1, s.autoRenew else { return nil }
        var cancelAt: Int64?
        if v.intendsCancel {
            guard let c = CancelPagePlan.cancelAt(population, v), population.stillCancels(i, at: c) else { return nil }
            cancelAt = c
        }
        let environment: SimEnvironment = population.isSandbox(i) ? .sandbox : .production
        let locale = CancelPagePlan.locale(population, i)
        let product = s.latest.product
        var answer: RealtimeHTTP.Answer?
        if let u = app.messaging.url(environment), u.since < v.time {
            let request = DecodedRealtimeRequestBody(
                originalTransactionId: population.originalTransactionId(i), appAppleId: population.config.appAppleId,
                productId: population.catalog.products[product].id, userLocale: locale,
                requestIdentifier: CancelPagePlan.requestIdentifier(population, v), signedDate: EpochMilliseconds(rawValue: v.time),
                rawEnvironment: environment.rawValue)
            if let signed = try? app.identity.chain.sign(request) {
                answer = await RealtimeHTTP.post(client, url: u.url, signedPayload: signed, timeoutMs: options.timeoutMs)
            } else {
                answer = RealtimeHTTP.Answer(status: nil, latencyMs: 0, body: [], failure: "OTHER")
            }
        }
        let judgement = app.judge(answer, product: product, locale: locale, at: v.time)
        let potential = CancelPagePotential.of(v, state: s, plan: plans[a], population)
        var averted = false
        if let cancelAt, let save = judgement.save,
           CancelPagePlan.effectDraw(population, v) < options.effect.probability(judgement, catalog: population.catalog) {
            averted = population.avertCancellation(i, at: v.time, cancelAt: cancelAt, save: save)
            if averted {
                app.cache.remove(i)
                app.notificationIndexBox.withLock { $0 = nil }
            }
        }
        return CancelPageRecord(
            view: v, product: product, locale: locale, posted: answer != nil, httpStatus: answer?.status,
            latencyMs: answer.map(\.latencyMs), judgement: judgement, averted: averted, potential: potential)
    }
}
