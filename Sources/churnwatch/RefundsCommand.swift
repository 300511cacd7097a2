import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

struct RefundsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refunds",
        abstract: "Apple's refund requests (CONSUMPTION_REQUEST): how many came, how many were answered in time, what Apple decided.",
        discussion: """
            Counts the requests Apple signed since --since (default: 30 days before --as-of): answered in time, not \
            sent (no consent, or the deadline passed), refused by Apple, still open; refunded and declined; then the \
            same by policy branch (docs/contracts.md "Refund requests"). --list adds one line per request, newest first.

            --json: one object {since, until, requests, answered_in_time, not_sent, failed, open, refunded, declined, \
            by_branch: [{branch, requests, refunded, declined}], bundle_id}, then with --list one object per request \
            {notification_uuid, original_transaction_id, transaction_id, environment, reason, requested_at, deadline, \
            state, policy_branch, attempts, answered_at, apple_status, last_error, decision, decided_at, bundle_id}.

            Several apps (every app in churnwatch.apps, or those given with --app): each app's lines after a line \
            "app BUNDLE_ID"; with --json each app's counts object, then its requests, app after app (the first \
            line is the default app's counts).

            Exit codes: 0; 78 a bad value; 64 a malformed command line; 69 database unreachable.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    @Option(name: .customLong("since"), help: ArgumentHelp("Requests Apple signed since this time (ISO 8601 or YYYY-MM-DD; default: 30 days before --as-of).", valueName: "time"))
    var since: String?

    @Option(name: .customLong("as-of"), help: ArgumentHelp("Requests signed before this moment, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    @Flag(name: .customLong("list"), help: "One line per request too, newest first (at most --limit).")
    var list = false

    @Option(name: .customLong("limit"), help: "Requests listed at most with --list, per app (default 100).")
    var limit = 100

    @Flag(name: .customLong("json"), help: "JSON lines: the counts, then (with --list) one per request.")
    var json = false

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            guard limit > 0 else { throw CLIError.configuration("--limit \(limit): give a positive number") }
            let until = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let since = try TimeArgument.parse(self.since, flag: "--since") ?? until.addingTimeInterval(-30 * 86_400)
            guard since < until else { throw CLIError.configuration("--since \(isoTime(since)) is not before --as-of \(isoTime(until))") }
            var blocks: [(app: String, lines: [String])] = []
            for store in try await app.readingStores(global) {
                let summary = try await store.refundSummary(since: since, until: until)
                let rows = list ? try await store.refundRequests(since: since, until: until, limit: limit) : []
                if json {
                    blocks.append((store.app, [try JSONOutput.line(RefundSummaryJSON(since: since, until: until, summary, app: store.app))]
                                   + (try rows.map { try JSONOutput.line(RefundRowJSON($0, app: store.app)) })))
                } else {
                    blocks.append((store.app, Self.text(summary, since: since, until: until) + rows.map(Self.line)))
                }
            }
            (json ? blocks.flatMap(\.lines) : PerAppText.lines(blocks)).forEach { print($0) }
        }
    }

    static func text(_ s: RefundSummary, since: Date, until: Date) -> [String] {
        var out = ["refund requests signed \(isoTime(since)) .. \(isoTime(until)): \(s.requests); answered in time \(s.answeredInTime), "
                   + "not sent \(s.notSent), refused by Apple \(s.failed), open \(s.open); refunded \(s.refunded), declined \(s.declined)"]
        for b in s.byBranch {
            out.append("  \(b.branch): \(b.requests) requests, \(b.refunded) refunded, \(b.declined) declined")
        }
        return out
    }

    static func line(_ r: RefundRequestRow) -> String {
        var line = "\(isoTime(r.requestedAt)) \(r.originalTransactionId) tx \(r.transactionId) \(r.state)"
        if let b = r.policyBranch { line += " (\(b))" }
        if let at = r.answeredAt { line += " answered \(isoTime(at))" }
        if let d = r.decision { line += "; Apple: \(d)" + (r.decidedAt.map { " \(isoTime($0))" } ?? "") }
        if let e = r.lastError, r.state != "answered" { line += "; \(e)" }
        return line
    }
}

struct RefundSummaryJSON: Encodable {
    var since: Date, until: Date
    var requests: Int, answered_in_time: Int, not_sent: Int, failed: Int, open: Int, refunded: Int, declined: Int
    var by_branch: [Branch]
    /// The app the counts are of.
    var bundle_id: String

    struct Branch: Encodable { var branch: String, requests: Int, refunded: Int, declined: Int }

    init(since: Date, until: Date, _ s: RefundSummary, app: String) {
        (self.since, self.until, bundle_id) = (since, until, app)
        (requests, answered_in_time, not_sent, failed, open) = (s.requests, s.answeredInTime, s.notSent, s.failed, s.open)
        (refunded, declined) = (s.refunded, s.declined)
        by_branch = s.byBranch.map { Branch(branch: $0.branch, requests: $0.requests, refunded: $0.refunded, declined: $0.declined) }
    }
}

struct RefundRowJSON: Encodable {
    var notification_uuid: String, original_transaction_id: String, transaction_id: String, environment: String
    var reason: String?, requested_at: Date, deadline: Date, state: String, policy_branch: String?, attempts: Int
    var answered_at: Date?, apple_status: Int?, last_error: String?, decision: String?, decided_at: Date?
    /// The app the request is of.
    var bundle_id: String

    init(_ r: RefundRequestRow, app: String) {
        bundle_id = app
        notification_uuid = r.notificationUUID.uuidString.lowercased()
        (original_transaction_id, transaction_id, environment) = (r.originalTransactionId, r.transactionId, r.environment)
        (reason, requested_at, deadline, state, policy_branch) = (r.reason, r.requestedAt, r.deadline, r.state, r.policyBranch)
        (attempts, answered_at, apple_status, last_error) = (r.attempts, r.answeredAt, r.appleStatus, r.lastError)
        (decision, decided_at) = (r.decision, r.decidedAt)
    }

    enum CodingKeys: String, CodingKey {
        case notification_uuid, original_transaction_id, transaction_id, environment, reason, requested_at, deadline, state,
             policy_branch, attempts, answered_at, apple_status, last_error, decision, decided_at, bundle_id
    }

    /// Every key, null when empty: a consumer reads the same fields on every line.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(notification_uuid, forKey: .notification_uuid); try c.encode(original_transaction_id, forKey: .original_transaction_id)
        try c.encode(transaction_id, forKey: .transaction_id); try c.encode(environment, forKey: .environment)
        try c.encode(reason, forKey: .reason); try c.encode(requested_at, forKey: .requested_at); try c.encode(deadline, forKey: .deadline)
        try c.encode(state, forKey: .state); try c.encode(policy_branch, forKey: .policy_branch); try c.encode(attempts, forKey: .attempts)
        try c.encode(answered_at, forKey: .answered_at); try c.encode(apple_status, forKey: .apple_status)
        try c.encode(last_error, forKey: .last_error); try c.encode(decision, forKey: .decision); try c.encode(decided_at, forKey: .decided_at)
        try c.encode(bundle_id, forKey: .bundle_id)
    }
}
