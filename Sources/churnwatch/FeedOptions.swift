import AppStoreServerAPI
import ArgumentParser
import ChurnStore
import Foundation
import Logging
import Polling

/// The change feed's settings (docs/contracts.md "Change feed"): flags, else environment
/// variables, else the defaults.
struct FeedOptions: ParsableArguments {
    @Option(name: .customLong("notifications"), help: ArgumentHelp("on: sync Apple's notification history (and the inbox) before planning, and plan by it; off: the windows alone (default: $CHURNWATCH_NOTIFICATIONS, else on).", valueName: "on|off"))
    var notifications: String?

    @Option(name: .customLong("notifications-overlap"), parsing: .unconditional, help: ArgumentHelp("How far back of the cursor each sync reads again, for records Apple files late (default: $CHURNWATCH_NOTIFICATIONS_OVERLAP, else 6h).", valueName: "duration"))
    var overlap: String?

    @Option(name: .customLong("notifications-lookback"), parsing: .unconditional, help: ArgumentHelp("How far back the first sync of a database reads (default: $CHURNWATCH_NOTIFICATIONS_LOOKBACK, else 180d, Apple's retention; Sandbox keeps 30d).", valueName: "duration"))
    var lookback: String?

    /// Whether the feed is on; one line naming the flag or variable when the value is neither.
    func enabled(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> Bool {
        let (name, value) = notifications.map { ("--notifications", $0) } ?? ("CHURNWATCH_NOTIFICATIONS", env["CHURNWATCH_NOTIFICATIONS"] ?? "")
        return try onOffSetting(name, value)
    }

    func settings(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> FeedSync.Settings {
        var s = FeedSync.Settings()
        if let d = try durationSetting(flag: "--notifications-overlap", variable: "CHURNWATCH_NOTIFICATIONS_OVERLAP", value: overlap,
                                       environment: env) { s.overlap = d }
        if let d = try durationSetting(flag: "--notifications-lookback", variable: "CHURNWATCH_NOTIFICATIONS_LOOKBACK", value: lookback,
                                       environment: env) { s.firstLookback = d }
        return s
    }

    /// The feed for `client`, or nil when it is off (`on`: an app's own setting, else this
    /// flag or variable).
    func feed(on: Bool? = nil, client: AppStoreServerAPIClient, store: ChurnStore, logger: Logger) throws -> FeedSync? {
        guard try on ?? enabled() else { return nil }
        return FeedSync(client: client, store: store, applier: FeedApplier(), settings: try settings(), logger: logger)
    }
}

/// An on/off setting (empty: on), or one line naming it (78).
func onOffSetting(_ name: String, _ value: String) throws -> Bool {
    switch value.trimmingCharacters(in: .whitespaces).lowercased() {
    case "", "on": return true
    case "off": return false
    default: throw CLIError.configuration("\(name) \"\(value.prefix(40))\" is neither on nor off")
    }
}

enum FeedSummaryText {
    /// One line for a sync, an ingest or the inbox.
    static func line(_ s: FeedSummary, what: String) -> String {
        var line = "\(what): \(s.read) read, \(s.applied) applied, \(s.duplicates) duplicate, \(s.stale) stale, "
            + "\(s.quarantined) quarantined, \(s.ignored) ignored; \(s.registered) subscriptions registered, "
            + "\(s.events) events, \(s.enqueued) win-back entries"
        if s.late > 0 { line += "; \(s.late) late, placed by their signedDate (\(s.superseded) events superseded)" }
        if s.pages > 0 { line += "; \(s.pages) history pages" }
        if let gap = s.gap { line += "; gap \(gap.lowerBound.ISO8601Format())..\(gap.upperBound.ISO8601Format()) (left to the windows)" }
        if let stop = s.stop {
            line += stop.isAskedFor ? "; stopped: \(stop.reason) (the next sync resumes)" : "; stopped early: \(stop.detail) (the next sync resumes)"
        }
        if let sandbox = s.sandboxFailure {
            line += "; \(sandbox.detail) (Production's history is read; the next sync retries Sandbox's from its cursor)"
        }
        return line
    }
}

enum FeedStatusText {
    /// The environment whose feed `status` and `plan` show: APPSTORE_ENVIRONMENT, else Production.
    static func environment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> AppStoreEnvironment {
        env["APPSTORE_ENVIRONMENT"].flatMap(AppStoreEnvironment.init(registered:)) ?? .production
    }

    /// The environments whose histories a sync reads (``FeedSync/environments``): in Production, Sandbox's too.
    static func environments(_ env: [String: String] = ProcessInfo.processInfo.environment) -> [AppStoreEnvironment] {
        environment(env) == .production ? [.production, .sandbox] : [.sandbox]
    }

    /// One line: the cursor and its age, the last sync, the last 24 hours, the inbox.
    static func line(_ f: FeedStatus, asOf: Date) -> String {
        guard let until = f.state.cursor.syncedUntil else {
            return f.state.cursor.inProgress == nil ? "change feed: never synced" + (f.inboxPending > 0 ? "; inbox: \(f.inboxPending) pending" : "")
                : "change feed: the first sync is under way (cut short: the next sync resumes it)"
        }
        let cursor = Date(timeIntervalSince1970: Double(until) / 1000)
        var line = "change feed: read up to \(isoTime(cursor)) (\(formatDuration(max(0, asOf.timeIntervalSince(cursor)))) ago)"
        if let at = f.state.lastSyncAt { line += "; last sync \(isoTime(at)): \(f.state.lastSyncRecords) records" }
        line += "; \(f.state.recordsTotal) records in all"
        let order: [NotificationOutcome] = [.applied, .stale, .quarantined, .ignored]
        let counts = order.compactMap { o in f.last24h[o].map { "\(o.rawValue) \($0)" } }
        line += "; last 24 h: " + (counts.isEmpty ? "none" : counts.joined(separator: ", "))
        if f.state.cursor.inProgress != nil { line += "; a sync was cut short (the next resumes it)" }
        line += "; inbox: \(f.inboxPending) pending"
        if !f.hasNotifications { line += "; no notifications yet: planning by the windows" }
        return line
    }
}

/// The change feed in `churnwatch status --json` (docs/contracts.md, commands).
struct FeedStatusJSON: Encodable {
    var synced_until: Date?, cursor_age_seconds: Double?, sync_in_progress: Bool
    var last_sync_at: Date?, last_sync_records: Int, records_total: Int64
    var last_24h: [String: Int], inbox_pending: Int, planning_by_feed_possible: Bool

    init(_ f: FeedStatus, asOf: Date) {
        let until = f.state.cursor.syncedUntil.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        synced_until = until
        cursor_age_seconds = until.map { max(0, asOf.timeIntervalSince($0)) }
        sync_in_progress = f.state.cursor.inProgress != nil
        last_sync_at = f.state.lastSyncAt
        last_sync_records = f.state.lastSyncRecords
        records_total = f.state.recordsTotal
        last_24h = Dictionary(uniqueKeysWithValues: f.last24h.map { ($0.key.rawValue, $0.value) })
        inbox_pending = f.inboxPending
        planning_by_feed_possible = f.hasNotifications
    }

    enum CodingKeys: String, CodingKey {
        case synced_until, cursor_age_seconds, sync_in_progress, last_sync_at, last_sync_records, records_total, last_24h,
             inbox_pending, planning_by_feed_possible
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(synced_until, forKey: .synced_until); try c.encode(cursor_age_seconds, forKey: .cursor_age_seconds)
        try c.encode(sync_in_progress, forKey: .sync_in_progress); try c.encode(last_sync_at, forKey: .last_sync_at)
        try c.encode(last_sync_records, forKey: .last_sync_records); try c.encode(records_total, forKey: .records_total)
        try c.encode(last_24h, forKey: .last_24h); try c.encode(inbox_pending, forKey: .inbox_pending)
        try c.encode(planning_by_feed_possible, forKey: .planning_by_feed_possible)
    }
}
