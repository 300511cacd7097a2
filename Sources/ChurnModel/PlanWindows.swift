import AppStoreModels
import Foundation

/// The selection windows of docs/architecture.md §1: which subscriptions a run polls.
public struct PlanWindows: Sendable, Equatable, Codable {
    /// Current period started within the last `start` (default 3 days).
    public var start: TimeInterval = 3 * 86_400
    /// Period ends within the next `end` (default 3 days) ...
    public var end: TimeInterval = 3 * 86_400
    /// ... or ended within the last `lapsed` (default 3 days).
    public var lapsed: TimeInterval = 3 * 86_400
    /// Not polled successfully for `staleAfter` (default 30 days).
    public var staleAfter: TimeInterval = 30 * 86_400
    /// With the feed: the stale safety net's cycle (default 120 days). The feed keeps most
    /// subscriptions current without a poll, so polling each of them once a cycle buys little;
    /// and after a night that polled everyone (the first), a plain age rule polled them all again
    /// on one night a cycle later: a wave of half the population. So each subscription has its
    /// own night in the cycle (``StaleSlots``), and is polled on it unless heard of (polled, or a
    /// notification applied: `last_success_at`) in the last `staleSkipRecent`; the same share of the
    /// population is due every night. One not heard of for `feedStaleAfter + staleSkipRecent` (its
    /// night fell on a night with no run) is due on any night.
    public var feedStaleAfter: TimeInterval = 120 * 86_400
    /// With the feed: a subscription heard of this recently (default 7 days) skips its stale night.
    public var staleSkipRecent: TimeInterval = 7 * 86_400
    /// Billing trouble is followed at most this long after the period ended (Apple retries up to 60 days).
    public var billingRetryLimit: TimeInterval = 60 * 86_400
    /// A window reason does not poll a subscription polled successfully less than this ago
    /// (so a second run on the same night spends nothing). New, failed, billing trouble and
    /// at-risk subscriptions are not held back by it beyond this.
    public var minInterval: TimeInterval = 12 * 3600
    /// The environments (Production, Sandbox) whose change feed is live (a sync read that
    /// environment's notification history up to the run, and the database has seen its
    /// notifications): for their subscriptions the date windows give way to the feed's safety
    /// net (``DueReason/periodEndUnnotified``, ``DueReason/billingNoNews``); the others are
    /// planned by the windows. Set by the run, not a flag.
    public var feedEnvironments: Set<AppStoreEnvironment> = []
    /// The environments whose change feed's first sync has not read its history through (in a
    /// Production deployment: Sandbox, while Apple's Sandbox is unreachable): their subscriptions
    /// are not planned at all. A poll before the first sync would take their state first, and
    /// the history read later would be logged as news. Set by the run, not a flag.
    public var heldEnvironments: Set<AppStoreEnvironment> = []
    /// The environment of a subscription registered without one (APPSTORE_ENVIRONMENT).
    public var configuredEnvironment = AppStoreEnvironment.production
    /// Some subscriptions are planned by the change feed.
    public var feedDriven: Bool { !feedEnvironments.isEmpty }
    /// With the feed: a period that ended less than this ago is not yet suspicious (Apple sends
    /// a renewal's notification within seconds, and files it in the history within minutes; an
    /// hour let a run shortly after a period's end miss it by a whole night).
    public var feedLag: TimeInterval = 300
    /// With the feed: billing trouble with no news for this long is polled, so every night in the
    /// first `billingDailyFor` of a retry (when most recoveries come: a recovery or an expiry
    /// Apple did not notify is seen by the next morning) and within `billingDailyFor / 3` of its
    /// end (`billingRetryLength` after the failed renewal, when Apple gives up and the
    /// subscription expires), and every `lapsed` in between.
    public var billingNoNewsAfter: TimeInterval = 12 * 3600
    public var billingDailyFor: TimeInterval = 15 * 86_400
    /// How long Apple retries a failed renewal: up to 60 days.
    public var billingRetryLength: TimeInterval = 60 * 86_400

    public init() {}
}

/// Why a subscription is due, in priority order (a subscription due for several reasons is
/// planned once, for the first).
public enum DueReason: String, Sendable, CaseIterable, Codable {
    case new
    case failed
    case billingTrouble = "billing_trouble"
    /// With the feed: billing trouble the feed has said nothing about for `billingNoNewsAfter` (12 h;
    /// between its first `billingDailyFor` and the days around its end, for `lapsed`), or a grace
    /// period that ended with no notification.
    case billingNoNews = "billing_no_news"
    case atRisk = "at_risk"
    case periodEnd = "period_end"
    /// With the feed: the stored period ended (more than `feedLag` ago) and no renewal or
    /// expiry was notified.
    case periodEndUnnotified = "period_end_unnotified"
    case periodStart = "period_start"
    case stale

    /// Planned because the change feed is silent where it should have spoken.
    public var feedDriven: Bool { self == .billingNoNews || self == .periodEndUnnotified }

    public var priority: Int16 { Int16(Self.allCases.firstIndex(of: self)! + 1) }
}

/// The stale safety net's nights (with the feed): a subscription's slot is its id's hash in
/// 0..<65,536 (PostgreSQL's `hashtext(original_transaction_id) & 65535`), and a cycle of
/// `feedStaleAfter` maps onto the slots from the Unix epoch on; a run at `asOf` takes the slots
/// the last night (24 hours up to `asOf`) passed over. Nightly runs take every slot once a cycle.
public struct StaleSlots: Sendable, Equatable {
    public static let count = 65_536
    /// Slots `lower..<upper`; when `lower > upper`, the range wraps: `lower..<count` and `0..<upper`.
    public var lower: Int
    public var upper: Int

    public init(lower: Int, upper: Int) {
        self.lower = lower
        self.upper = upper
    }

    /// The slots due at `asOf`, or nil when every slot is (a cycle no longer than a night).
    public static func due(asOf: Date, cycle: TimeInterval, night: TimeInterval = 86_400) -> StaleSlots? {
        guard cycle > night else { return nil }
        func slot(_ t: Date) -> Int {
            let phase = t.timeIntervalSince1970.truncatingRemainder(dividingBy: cycle)
            let positive = phase < 0 ? phase + cycle : phase
            return min(count - 1, Int(positive / cycle * Double(count)))
        }
        return StaleSlots(lower: slot(asOf.addingTimeInterval(-night)), upper: slot(asOf))
    }

    public func contains(_ slot: Int) -> Bool {
        lower <= upper ? (slot >= lower && slot < upper) : (slot >= lower || slot < upper)
    }
}
