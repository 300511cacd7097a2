import AppStoreModels

/// `responseBodyV2DecodedPayload` of an App Store Server Notification V2 (docs/apple-api.md, "Notifications V2").
struct NotificationPayloadV2: Encodable {
    struct Data: Encodable {
        var appAppleId: Int64
        var bundleId: String
        var bundleVersion = "1"
        var environment: String
        var signedRenewalInfo: String
        var signedTransactionInfo: String
        var status: Int32
        /// `CONSUMPTION_REQUEST` only: why the customer asked for a refund.
        var consumptionRequestReason: String?
    }

    var notificationType: String
    var subtype: String?
    var notificationUUID: String
    var version = "2.0"
    var signedDate: Int64
    var data: Data
}

/// `NotificationHistoryResponse`.
struct NotificationHistoryBody: Encodable {
    struct Attempt: Encodable {
        var attemptDate: Int64
        var sendAttemptResult: String
    }

    struct Item: Encodable {
        var sendAttempts: [Attempt]
        var signedPayload: String
    }

    var notificationHistory: [Item]
    var hasMore: Bool
    var paginationToken: String
}

extension SimApp {
    /// Every notification of the population in `signedDate` order, built on first use.
    var notificationIndex: NotificationIndex {
        notificationIndexBox.withLock { box in
            if let index = box { return index }
            let index = NotificationIndex(population, options: options.notifications)
            box = index
            return index
        }
    }

    /// The `signedPayload` of the notification of change `k` of subscription `i`: signed at the
    /// moment of the change, with the subscription's transaction and renewal info as of then
    /// (and the subscription's payload fault, if it has one).
    public func signedNotification(_ i: Int, _ k: Int) -> String {
        let tl = population.timeline(i)
        let n = population.notification(i, k)
        let e = tl[tl.startIndex + k]
        let s = SubscriptionState.fold(tl[tl.startIndex...tl.startIndex + k], at: n.time, catalog: population.catalog)
        let tx = population.transactionPayload(i, s.latest, originalPurchaseDate: s.originalPurchaseDate, signedAt: n.time)
        let renewal = population.renewalPayload(i, s)
        let f = fault(i)
        let data = NotificationPayloadV2.Data(
            appAppleId: population.config.appAppleId,
            bundleId: f == .foreignBundle ? "com.example.someone-else" : population.config.bundleId,
            environment: population.environment(i),
            signedRenewalInfo: jws(i, payload: payloadBytes(i, renewal: renewal)),
            signedTransactionInfo: jws(i, payload: payloadBytes(i, transaction: tx)),
            status: s.status,
            consumptionRequestReason: e.kind == .consumptionRequest ? ConsumptionRequestReason(rawValue: e.a)?.apple : nil)
        let payload = NotificationPayloadV2(
            notificationType: n.type, subtype: n.subtype, notificationUUID: population.notificationUUID(i, k),
            signedDate: n.time, data: data)
        stats.withLock {
            $0.signatures += 3
            if let f { $0.faults[f.rawValue, default: 0] += 1 }
        }
        return jws(i, payload: encode(payload, extraFields: false))
    }

    /// `POST /inApps/v1/notifications/history[?paginationToken=]` (docs/apple-api.md, "Notifications V2").
    func notificationHistory(_ req: SimRequest, now: Int64) throws(AppleError) -> SimResponse {
        guard req.method == "POST" else { throw AppleError(404, 4_040_000, "Not found.") }
        let q = try NotificationHistoryQuery.parse(req.body, now: now, windowDays: req.environment == .sandbox ? 30 : 180)
        let sorted: [NotificationIndex.Entry]
        if let id = q.transactionId {
            let (i, _) = try resolve(id, env: req.environment, now: now)
            sorted = NotificationIndex.entries(
                of: population.customerSubscriptions(i), population, options: options.notifications)
        } else {
            sorted = notificationIndex.entries
        }
        let sandbox = req.environment == .sandbox
        let token = req.query.first { $0.0 == "paginationToken" }?.1
        let page = try q.page(sorted, token: token, now: now) { e in
            let i = Int(e.subscriber), k = Int(e.index)
            guard population.isSandbox(i) == sandbox else { return false }
            return q.matches(population.notification(i, k), attempts: attempts(i, k, now: now))
        }
        let items = page.entries.map { e in
            let i = Int(e.subscriber), k = Int(e.index)
            return NotificationHistoryBody.Item(
                sendAttempts: attempts(i, k, now: now).map { .init(attemptDate: $0.date, sendAttemptResult: $0.result) },
                signedPayload: signedNotification(i, k))
        }
        return .json(200, NotificationHistoryBody(notificationHistory: items, hasMore: page.hasMore, paginationToken: page.token))
    }

    /// The delivery attempts of a notification: those made, when the simulator delivers (and it
    /// was signed since), else the ones the options describe.
    private func attempts(_ i: Int, _ k: Int, now: Int64) -> [SimSendAttempt] {
        if let made = delivery.withLock({ $0 })?.attempts(self, i, k) { return made }
        return population.sendAttempts(i, k, at: population.notification(i, k).time, now: now, options: options.notifications)
    }

    /// The notification UUID of a truth event's change when the app was notified of it, else nil.
    func notificationUUID(of e: TruthEvent) -> String? {
        population.isNotified(e.subscriber, e.eventIndex, options: options.notifications)
            ? population.notificationUUID(e.subscriber, e.eventIndex) : nil
    }

    /// `GET /_sim/notifications?from=ISO&to=ISO` (default start..now): every change that sends a
    /// notification, with `notified` saying whether the app got it.
    func notificationsTruth(_ query: [String: String]) -> SimResponse? {
        guard let (from, to) = timeWindow(query) else { return nil }
        var changes: [SimNotification] = []
        for i in 0..<population.count {
            let tl = population.timeline(i)
            for (k, e) in tl.enumerated() where e.time >= from && e.time < to {
                changes.append(population.notification(i, k))
            }
        }
        changes.sort { ($0.time, $0.subscriber, $0.eventIndex) < ($1.time, $1.subscriber, $1.eventIndex) }
        var w = JSONWriter(capacity: changes.count * 220 + 64)
        w.beginObject()
        w.date("from", from)
        w.date("to", to)
        w.beginArray("notifications")
        for n in changes {
            w.beginObject()
            w.string("original_transaction_id", population.originalTransactionId(n.subscriber))
            w.string("environment", population.environment(n.subscriber))
            w.string("notification_type", n.type)
            w.string("subtype", n.subtype)
            w.string("notification_uuid", population.notificationUUID(n.subscriber, n.eventIndex))
            w.date("signed_date", n.time)
            w.bool("notified", population.isNotified(n.subscriber, n.eventIndex, options: options.notifications))
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return .json(200, w.bytes)
    }
}

extension SimApp {
    /// The `from` and `to` of a truth query (ISO 8601; default the population's start and the
    /// clock's now); nil when either is not a time.
    func timeWindow(_ query: [String: String]) -> (from: Int64, to: Int64)? {
        var window = (from: population.config.start, to: clock.now())
        if let s = query["from"] {
            guard let t = SimTime.parse(s) else { return nil }
            window.from = t
        }
        if let s = query["to"] {
            guard let t = SimTime.parse(s) else { return nil }
            window.to = t
        }
        return window
    }
}
