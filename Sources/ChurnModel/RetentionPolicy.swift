import Foundation

/// How long `churnwatch prune` keeps each table's rows that are only needed for a while
/// (docs/contracts.md, "Retention"). The retention team's record is kept forever and has no
/// setting here: the event log, the daily segment history, the win-back entries and their
/// outcomes, the runs, and one row per subscription.
public struct RetentionPolicy: Sendable, Equatable {
    /// A table prune trims, with its setting's name, default and floor.
    public enum Table: String, Sendable, CaseIterable {
        /// Items and worker rows of finished runs, by the run's as-of; the newest finished run
        /// of each kind keeps its items whatever its age (`status` and the metrics read them).
        case runItems = "run_items"
        /// Notification rows, by Apple's signed date (a quarantined one's by when it came).
        case notifications
        /// Processed inbox rows, by when they were processed.
        case inbox = "notification_inbox"
        /// Quarantined payloads, by when they came.
        case quarantine
        /// Moves between segments (the report's flows), by the run's as-of.
        case segmentChanges = "segment_changes"
        /// Transactions whose period ended this long ago, by their expiry; a subscription's
        /// newest transaction is never removed.
        case transactions
        /// The cancel page's answered requests, by Apple's signed date (their events stay in
        /// the event log).
        case retentionRequests = "retention_message_requests"
        /// Webhook messages and their deliveries, by when the message was written; one with a
        /// delivery still pending is kept.
        case webhookMessages = "webhook_messages"

        /// What is kept when nothing is configured.
        public var defaultKeep: TimeInterval {
            switch self {
            case .runItems: 35 * RetentionPolicy.day
            case .notifications: 200 * RetentionPolicy.day
            case .inbox: 30 * RetentionPolicy.day
            case .quarantine: 90 * RetentionPolicy.day
            case .segmentChanges: 400 * RetentionPolicy.day
            case .transactions: 60 * RetentionPolicy.day
            case .retentionRequests: 400 * RetentionPolicy.day
            case .webhookMessages: 30 * RetentionPolicy.day
            }
        }

        /// The shortest retention that keeps what the runs, the report and resumption need, and why.
        public var floor: (keep: TimeInterval, why: String) {
            switch self {
            case .runItems: (2 * RetentionPolicy.day, "the last night's items answer `status`, the metrics and a resumed run")
            case .notifications: (180 * RetentionPolicy.day,
                                  "Apple's notification history reaches back 180 days: a notification read again must still be a duplicate")
            case .inbox: (RetentionPolicy.day, "a processed row younger than a day may still be read by a sync in progress")
            case .quarantine: (RetentionPolicy.day, "a payload quarantined tonight is the morning's diagnosis")
            case .segmentChanges: (366 * RetentionPolicy.day, "`churnwatch report --days` reaches back 366 days")
            case .transactions: (31 * RetentionPolicy.day, "the table's readers follow renewals and refunds at least a month back")
            case .retentionRequests: (60 * RetentionPolicy.day,
                                      "`outcomes --campaign cancel_page` judges a view up to 35 days on, and Apple's retry must find its answer")
            case .webhookMessages: (7 * RetentionPolicy.day,
                                    "a delivery is retried for 27.5 hours, and `webhooks replay --since` reaches back a week at least")
            }
        }
    }

    public static let day: TimeInterval = 86_400

    /// Retention per table.
    public private(set) var keep: [Table: TimeInterval]

    public init() {
        keep = Dictionary(uniqueKeysWithValues: Table.allCases.map { ($0, $0.defaultKeep) })
    }

    public subscript(_ table: Table) -> TimeInterval { keep[table] ?? table.defaultKeep }

    /// Sets one table's retention, refusing one shorter than its floor.
    public mutating func set(_ table: Table, _ value: TimeInterval) throws(RetentionPolicyError) {
        guard value >= table.floor.keep else {
            throw RetentionPolicyError("\(table.rawValue) must be kept at least \(Int(table.floor.keep / Self.day)) days, not "
                                       + "\(Self.days(value)): \(table.floor.why)")
        }
        keep[table] = value
    }

    public static func days(_ t: TimeInterval) -> String {
        t.truncatingRemainder(dividingBy: day) == 0 ? "\(Int(t / day)) days" : String(format: "%.2f days", t / day)
    }
}

/// A retention setting that cannot be used (one line, naming the table and the floor).
public struct RetentionPolicyError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
