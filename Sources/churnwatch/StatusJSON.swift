import ChurnStore
import Foundation

/// One app's part of `churnwatch status`: its run (nil: none yet) and its change feed.
struct AppStatus {
    var app: String
    var status: RunStatus?
    var feed: FeedStatus
    /// The moment the figures are measured at (`--as-of`).
    var measuredAt: Date
    /// A Production app's Sandbox history, read by the same syncs on its own cursor (nil: a
    /// Sandbox deployment).
    var sandbox: FeedState? = nil

    /// The feed is shown once it was ever used.
    var feedUsed: Bool {
        feed.state.lastSyncAt != nil || feed.state.cursor.inProgress != nil || feed.hasNotifications || feed.inboxPending > 0
    }

    /// The run's lines (or "no runs yet"), then the feed's once used.
    var text: [String] {
        (status.map(StatusCommand.text) ?? ["no runs yet"])
            + (feedUsed ? [FeedStatusText.line(feed, asOf: measuredAt)] + sandboxLine : [])
    }

    /// The Sandbox history's line: how far it is read, or that its first sync holds its
    /// subscriptions back.
    var sandboxLine: [String] {
        guard let sandbox else { return [] }
        guard let until = sandbox.cursor.syncedUntil else {
            return ["Sandbox history: the first sync is not read through: Sandbox subscriptions are not planned until it is (each sync retries it)"]
        }
        let cursor = Date(timeIntervalSince1970: Double(until) / 1000)
        return ["Sandbox history: read up to \(isoTime(cursor)) (\(formatDuration(max(0, measuredAt.timeIntervalSince(cursor)))) ago)"]
    }

}

/// `churnwatch status --json`: one object. Its fields are the first app's (the default app, or
/// run RUN's app): `run` (null before any run), `items`, `calls`, `workers`, `active_seconds`,
/// `items_per_second`, `eta_seconds`, `measured_at`, `feed` once the change feed was used, and
/// `bundle_id`; then `apps`, one such object per app shown (the first app's too), without `apps`.
struct StatusJSON: Encodable {
    var bundleId: String?
    var run: RunStatusJSON?
    var feed: FeedStatusJSON?
    var sandboxFeed: SandboxFeedJSON?
    var apps: [StatusJSON]?
    /// Every webhook endpoint of the database (top level only; absent when there is none).
    var webhooks: [WebhookEndpointJSON]?

    init(_ shown: [AppStatus]) {
        self.init(app: shown[0])
        apps = shown.map { StatusJSON(app: $0) }
    }

    init(app s: AppStatus) {
        bundleId = s.app.isEmpty ? nil : s.app
        run = s.status.map(RunStatusJSON.init)
        feed = s.feedUsed ? FeedStatusJSON(s.feed, asOf: s.measuredAt) : nil
        sandboxFeed = s.feedUsed ? s.sandbox.map { SandboxFeedJSON($0, asOf: s.measuredAt) } : nil
    }

    enum CodingKeys: String, CodingKey {
        case bundle_id, run, items, calls, workers, active_seconds, items_per_second, eta_seconds, measured_at, feed, sandbox_feed, apps, webhooks
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(bundleId, forKey: .bundle_id)
        if let run { try run.encode(into: &c) } else { try c.encodeNil(forKey: .run) }
        try c.encodeIfPresent(feed, forKey: .feed)
        try c.encodeIfPresent(sandboxFeed, forKey: .sandbox_feed)
        try c.encodeIfPresent(apps, forKey: .apps)
        try c.encodeIfPresent(webhooks, forKey: .webhooks)
    }
}

/// A run in `churnwatch status --json`: the fields of an app's object when it has a run.
struct RunStatusJSON {
    struct Run: Encodable {
        var id: Int64, kind: String, as_of: Date, status: String, started_at: Date, finished_at: Date?, due: Int
        enum CodingKeys: String, CodingKey { case id, kind, as_of, status, started_at, finished_at, due }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id); try c.encode(kind, forKey: .kind); try c.encode(as_of, forKey: .as_of)
            try c.encode(status, forKey: .status); try c.encode(started_at, forKey: .started_at)
            try c.encode(finished_at, forKey: .finished_at); try c.encode(due, forKey: .due)
        }
    }
    struct Items: Encodable {
        var total: Int, finished: Int, done: Int, failed: Int, claimed: Int, pending: Int, failed_by_reason: [String: Int]
    }
    struct Calls: Encodable {
        var total: Int, by_endpoint: [String: Int], per_second: Double?, http_429: Int?
        enum CodingKeys: String, CodingKey { case total, by_endpoint, per_second, http_429 }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(total, forKey: .total); try c.encode(by_endpoint, forKey: .by_endpoint)
            try c.encode(per_second, forKey: .per_second); try c.encode(http_429, forKey: .http_429)
        }
    }
    struct Workers: Encodable {
        var count: Int, last_seen_at: Date?
        enum CodingKeys: String, CodingKey { case count, last_seen_at }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(count, forKey: .count); try c.encode(last_seen_at, forKey: .last_seen_at)
        }
    }

    var run: Run, items: Items, calls: Calls, workers: Workers
    var active_seconds: Double, items_per_second: Double?, eta_seconds: Double?, measured_at: Date

    init(_ s: RunStatus) {
        run = Run(id: s.run.id, kind: s.run.kind.rawValue, as_of: s.run.asOf, status: s.run.status.rawValue,
                  started_at: s.run.startedAt, finished_at: s.run.finishedAt, due: s.run.due)
        items = Items(total: s.items.total, finished: s.finishedItems, done: s.items.done, failed: s.items.failed,
                      claimed: s.items.claimed, pending: s.items.pending, failed_by_reason: s.failedByReason)
        calls = Calls(total: s.callsTotal, by_endpoint: s.calls, per_second: s.callRate.map(Self.round), http_429: s.http429)
        workers = Workers(count: s.workers.count, last_seen_at: s.lastSeen)
        active_seconds = Self.round(s.activeSeconds)
        items_per_second = s.itemRate.map(Self.round)
        eta_seconds = s.eta.map { $0.rounded(.up) }
        measured_at = s.measuredAt
    }

    func encode(into c: inout KeyedEncodingContainer<StatusJSON.CodingKeys>) throws {
        try c.encode(run, forKey: .run); try c.encode(items, forKey: .items); try c.encode(calls, forKey: .calls)
        try c.encode(workers, forKey: .workers); try c.encode(active_seconds, forKey: .active_seconds)
        try c.encode(items_per_second, forKey: .items_per_second); try c.encode(eta_seconds, forKey: .eta_seconds)
        try c.encode(measured_at, forKey: .measured_at)
    }

    static func round(_ x: Double) -> Double { (x * 1000).rounded() / 1000 }
}

/// A Production app's Sandbox history in `churnwatch status --json` (`sandbox_feed`).
struct SandboxFeedJSON: Encodable {
    var synced_until: Date?, cursor_age_seconds: Double?, first_sync_pending: Bool, last_sync_at: Date?

    init(_ state: FeedState, asOf: Date) {
        let until = state.cursor.syncedUntil.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        synced_until = until
        cursor_age_seconds = until.map { max(0, asOf.timeIntervalSince($0)) }
        first_sync_pending = until == nil
        last_sync_at = state.lastSyncAt
    }

    enum CodingKeys: String, CodingKey { case synced_until, cursor_age_seconds, first_sync_pending, last_sync_at }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(synced_until, forKey: .synced_until); try c.encode(cursor_age_seconds, forKey: .cursor_age_seconds)
        try c.encode(first_sync_pending, forKey: .first_sync_pending); try c.encode(last_sync_at, forKey: .last_sync_at)
    }
}
