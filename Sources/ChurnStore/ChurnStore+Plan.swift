import AppStoreModels
import ChurnModel
import Foundation
import Postgres

/// How many subscriptions a run would poll, by reason.
public struct PlanCounts: Sendable, Equatable {
    public var byReason: [DueReason: Int] = [:]
    /// Of the due, how many were registered with a legacy receipt alone (polled through
    /// verifyReceipt once, to learn their id; ReceiptRegistration).
    public var receiptOnly = 0
    /// Of the due, how many will probably need a history call (never polled, or past renewal).
    public var likelyHistory = 0
    public var total: Int { byReason.values.reduce(0, +) }
}

extension ChurnStore {
    /// The due rules of docs/architecture.md §1, in priority order: the condition on a row of
    /// `churnwatch.subscriptions` under which it is due for each reason.
    static func dueRules(asOf: Date, windows w: PlanWindows) -> [(reason: DueReason, condition: PostgresQuery)] {
        let startFrom = asOf.addingTimeInterval(-w.start)
        let endUntil = asOf.addingTimeInterval(w.end)
        let lapsedFrom = asOf.addingTimeInterval(-w.lapsed)
        let staleBefore = asOf.addingTimeInterval(-w.staleAfter)
        // Apple retries up to 60 days; one more look within the lapsed window sees how it ended.
        let retryFrom = asOf.addingTimeInterval(-(w.billingRetryLimit + w.lapsed))
        let recent = asOf.addingTimeInterval(-w.minInterval)
        let notRecent: PostgresQuery = "(last_success_at IS NULL OR last_success_at < \(recent))"
        let windowRules: [(reason: DueReason, condition: PostgresQuery)] = [
            (.new, "last_success_at IS NULL AND (last_polled_at IS NULL OR last_polled_at < \(recent) OR last_outcome = 'failed')"),
            (.failed, "last_outcome = 'failed'"),
            (.billingTrouble, "state IN ('billing_retry', 'grace_period') AND expires_at >= \(retryFrom) AND \(notRecent)"),
            (.atRisk, """
                state = 'active' AND (auto_renew = false OR price_increase_status = 0 OR auto_renew_product_id IS DISTINCT FROM product_id)
                AND \(notRecent)
                """),
            (.periodEnd, "expires_at BETWEEN \(lapsedFrom) AND \(endUntil) AND \(notRecent)"),
            (.periodStart, "period_start BETWEEN \(startFrom) AND \(asOf) AND \(notRecent)"),
            (.stale, "last_success_at < \(staleBefore)"),
        ]
        guard w.feedDriven else { return windowRules }
        let feedRules = feedDueRules(asOf: asOf, windows: w)
        if w.feedEnvironments.isSuperset(of: [.production, .sandbox]) { return feedRules }
        // Some environments' feeds are live, not all: each subscription by its environment's
        // rules (new and failed are the same in both).
        let live = w.feedEnvironments.map(\.rawValue).sorted()
        let inFeed: PostgresQuery = "coalesce(environment, \(w.configuredEnvironment.rawValue)) = ANY(\(live)::text[])"
        return DueReason.allCases.compactMap { reason in
            let byFeed = feedRules.first { $0.reason == reason }?.condition
            let byWindows = windowRules.first { $0.reason == reason }?.condition
            switch (byFeed, byWindows) {
            case (let f?, let c?) where reason == .stale: return (reason, "(\(inFeed) AND (\(f))) OR (NOT \(inFeed) AND (\(c)))")
            case (let f?, _?): return (reason, f)
            case (let f?, nil): return (reason, "\(inFeed) AND (\(f))")
            case (nil, let c?): return (reason, "NOT \(inFeed) AND (\(c))")
            case (nil, nil): return nil
            }
        }
    }

    /// The reasons a plan by the change feed has, in priority order.
    public static let feedReasons: [DueReason] = [.new, .failed, .billingNoNews, .periodEndUnnotified, .stale]

    /// The due rules when the change feed is live: new, failed and stale as without it; the
    /// date windows (period start and end, at risk, billing trouble by date) give way to the
    /// places where the feed is silent and should not be: a stored period that ended (more than
    /// `feedLag` ago) with no renewal or expiry since, however long ago (a state the first sync
    /// took from an old notification is checked once), and billing trouble with no news for
    /// `billingNoNewsAfter` in its first `billingDailyFor` and around its end (every night), for
    /// `lapsed` in between, or a grace period that ended unnotified. A subscription the feed
    /// keeps current is not polled for its dates; `minInterval` keeps a contradiction Apple keeps answering
    /// (a lagging status) to one poll a night.
    static func feedDueRules(asOf: Date, windows w: PlanWindows) -> [(reason: DueReason, condition: PostgresQuery)] {
        let ended = asOf.addingTimeInterval(-w.feedLag)
        let noNewsSince = asOf.addingTimeInterval(-w.billingNoNewsAfter)
        let dailyFrom = asOf.addingTimeInterval(-w.billingDailyFor)
        // The retry's last days: it ends `billingRetryLength` after the failed renewal.
        let endingFrom = asOf.addingTimeInterval(-w.billingRetryLength - w.billingDailyFor / 3)
        let endingUntil = asOf.addingTimeInterval(-w.billingRetryLength + w.billingDailyFor / 3)
        let quietSince = asOf.addingTimeInterval(-w.lapsed)
        let recent = asOf.addingTimeInterval(-w.minInterval)
        // Polled, not merely told: a state the feed wrote counts as no poll.
        let notPolled: PostgresQuery = "(last_polled_at IS NULL OR last_polled_at < \(recent))"
        return [
            (.new, "last_success_at IS NULL AND (last_polled_at IS NULL OR last_polled_at < \(recent) OR last_outcome = 'failed')"),
            (.failed, "last_outcome = 'failed'"),
            (.billingNoNews, """
                state IN ('billing_retry', 'grace_period') AND \(notPolled)
                AND (signed_date IS NULL
                     OR (signed_date < \(noNewsSince) AND (expires_at >= \(dailyFrom) OR expires_at BETWEEN \(endingFrom) AND \(endingUntil)))
                     OR signed_date < \(quietSince) OR (state = 'grace_period' AND grace_period_expires_at < \(ended)))
                """),
            (.periodEndUnnotified, "state = 'active' AND expires_at < \(ended) AND \(notPolled)"),
            (.stale, feedStaleRule(asOf: asOf, windows: w)),
        ]
    }

    /// With the feed, the stale safety net levelled over its cycle (``PlanWindows/feedStaleAfter``):
    /// on its own night (``StaleSlots``) unless heard of (`last_success_at`: polled, or a notification
    /// applied) in the last `staleSkipRecent` (a quarter of the cycle if that is shorter), or on any
    /// night once not heard of for the cycle and that. A
    /// cycle no longer than a night is a plain age.
    static func feedStaleRule(asOf: Date, windows w: PlanWindows) -> PostgresQuery {
        let cycle = w.feedStaleAfter
        guard let slots = StaleSlots.due(asOf: asOf, cycle: cycle) else {
            return "last_success_at < \(asOf.addingTimeInterval(-cycle))"
        }
        let skip = min(w.staleSkipRecent, cycle / 4)
        let overdue = asOf.addingTimeInterval(-(cycle + skip))
        let skipAfter = asOf.addingTimeInterval(-skip)
        let slot: PostgresQuery = "(hashtext(original_transaction_id) & 65535)"
        let onItsNight: PostgresQuery = slots.lower <= slots.upper
            ? "\(slot) >= \(slots.lower) AND \(slot) < \(slots.upper)"
            : "(\(slot) >= \(slots.lower) OR \(slot) < \(slots.upper))"
        return "last_success_at < \(overdue) OR (last_success_at < \(skipAfter) AND \(onItsNight))"
    }

    /// The due selection, in one pass over `churnwatch.subscriptions`: one row per due
    /// subscription, `(original_transaction_id, reason, priority)`, for the first reason it is
    /// due for, of `app`'s subscriptions. `columns` adds columns of the subscription (e.g.
    /// `", receipt_data IS NOT NULL AS r"`).
    ///
    /// One scan, not one branch per reason: at a million subscriptions a third or more are due
    /// on a night (every page of the table holds some), so the branches read the whole table
    /// between them, and their union had to be sorted and made distinct. The disjunction in
    /// WHERE still lets the planner combine the window indexes (a BitmapOr) when few are due.
    static func dueSelection(app: String, asOf: Date, windows: PlanWindows, columns: PostgresQuery = "") -> PostgresQuery {
        let rules = dueRules(asOf: asOf, windows: windows)
        let reason = PostgresQuery.joined(rules.map { "WHEN \($0.condition) THEN \($0.reason.rawValue)" }, separator: "\n")
        let priority = PostgresQuery.joined(rules.map { "WHEN \($0.condition) THEN \($0.reason.priority)" }, separator: "\n")
        let due = PostgresQuery.joined(rules.map { "(\($0.condition))" }, separator: "\nOR ")
        // Subscriptions of an environment whose first sync is not read through wait for it.
        let held = windows.heldEnvironments.map(\.rawValue).sorted()
        let notHeld: PostgresQuery = held.isEmpty ? "true"
            : "coalesce(environment, \(windows.configuredEnvironment.rawValue)) <> ALL(\(held)::text[])"
        return """
            SELECT original_transaction_id, CASE \(reason) END AS reason, CASE \(priority) END AS priority\(columns)
            FROM churnwatch.subscriptions
            WHERE bundle_id = \(app) AND \(notHeld) AND (\(due))
            """
    }

    /// Statements that read or plan over the whole table run without JIT: at a million rows
    /// the planner's cost passes the JIT thresholds, and compiling the expressions took longer
    /// (3 to 4 s with LLVM optimization) than the scan they were compiled for.
    static let withoutJIT: PostgresQuery = "SET LOCAL jit = off"

    /// Counts what a run at `asOf` would poll. Writes nothing.
    public func planCounts(asOf: Date, windows: PlanWindows) async throws -> PlanCounts {
        let selection = Self.dueSelection(app: app, asOf: asOf, windows: windows, columns: """
            , (receipt_data IS NOT NULL AND original_transaction_id LIKE 'receipt:%') AS receipt_only,
              (last_success_at IS NULL OR expires_at <= \(asOf)) AS likely_history
            """)
        return try await pool.withTransaction { db in
            try db.execute(Self.withoutJIT)
            var counts = PlanCounts()
            let rows = try db.query("""
                SELECT reason, count(*) AS n,
                       count(*) FILTER (WHERE receipt_only) AS receipt_only,
                       count(*) FILTER (WHERE likely_history) AS likely_history
                FROM (\(selection)) AS d
                GROUP BY reason
                """)
            for row in rows {
                guard let reason = DueReason(rawValue: try row.decode(String.self, "reason")) else { continue }
                counts.byReason[reason] = try row.decode(Int.self, "n")
                counts.receiptOnly += try row.decode(Int.self, "receipt_only")
                counts.likelyHistory += try row.decode(Int.self, "likely_history")
            }
            return counts
        }
    }
}
