import Foundation
import Postgres
import Testing

/// Apple's refund requests against the simulator's ground truth (`GET /_sim/truth/consumption`):
/// the 10-minute sync (here hourly, well inside Apple's 12 hours) answers every consented
/// request once, in time, with the policy's body; nothing for the rest; Apple's decisions are
/// recorded; and a sync killed mid-answer beside a 429 storm still ends with every consented
/// request answered in time.
@Suite("refund requests against the simulator", .serialized)
struct RefundRequestsCLITests {
    typealias E2E = NightlyRunEndToEndTests
    static let day = E2E.day
    static let hour: TimeInterval = 3600

    struct Truth: Decodable {
        struct Answer: Decodable {
            var received_at: String
            var in_time: Bool
            var body: [String: JSONValue]
        }
        struct Request: Decodable {
            var original_transaction_id: String
            var transaction_id: String
            var notified: Bool
            var requested_at: String
            var deadline: String
            var decision: String?
            var decided_at: String?
            var answers: [Answer]
        }
        var requests: [Request]
    }

    /// A JSON scalar of an answer's body, compared as text.
    enum JSONValue: Decodable, Equatable, CustomStringConvertible {
        case bool(Bool), number(Double), string(String)
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let b = try? c.decode(Bool.self) { self = .bool(b) } else if let n = try? c.decode(Double.self) { self = .number(n) } else {
                self = .string(try c.decode(String.self))
            }
        }
        var description: String {
            switch self {
            case .bool(let b): "\(b)"
            case .number(let n): "\(n)"
            case .string(let s): s
            }
        }
    }

    static func truth(_ sim: SimulatorProcess, from: Date, to: Date) throws -> [Truth.Request] {
        try JSONDecoder().decode(Truth.self, from: try sim.request("GET", "/_sim/truth/consumption?from=\(E2E.iso(from))&to=\(E2E.iso(to))")).requests
    }

    /// The app's consent rows, by a fixed split of the subscriptions (the last digit of a hash of
    /// the id): 0-5 consented by app account token (a token no other subscription shares), with a
    /// sample given for 0-2; 6 refused by token; 7 consented by original transaction id with an
    /// undelivered purchase; 8-9 no row. Returns what each subscription's answer must say: nil
    /// for nothing sent, else (delivery status, sample).
    static func writeConsent(_ db: PostgresConnection) throws -> [String: (delivery: String, sample: Bool)?] {
        try db.execute("""
            WITH s AS (
                SELECT original_transaction_id AS otid, app_account_token AS token, abs(hashtext(original_transaction_id)) % 10 AS bucket,
                       count(*) OVER (PARTITION BY app_account_token) AS sharing
                FROM churnwatch.subscriptions)
            INSERT INTO churnwatch.refund_consent (app_account_token, original_transaction_id, customer_consented, delivery_status,
                                                   sample_content_provided)
            SELECT CASE WHEN bucket <= 6 THEN token END, CASE WHEN bucket = 7 THEN otid END, bucket <> 6,
                   CASE WHEN bucket = 7 THEN 'UNDELIVERED_OTHER' END, CASE WHEN bucket <= 7 THEN bucket <= 2 END
            FROM s WHERE (bucket <= 6 AND token IS NOT NULL AND sharing = 1) OR bucket = 7
            """)
        var expected: [String: (delivery: String, sample: Bool)?] = [:]
        for row in try db.query("""
            SELECT s.original_transaction_id, c.customer_consented, c.delivery_status, c.sample_content_provided
            FROM churnwatch.subscriptions s
            LEFT JOIN churnwatch.refund_consent c ON c.original_transaction_id = s.original_transaction_id
                 OR (c.app_account_token = s.app_account_token)
            """) {
            let otid = try row.decode(String.self, at: 0)
            guard try row.decode(Bool?.self, at: 1) == true else { expected[otid] = .some(nil); continue }
            expected[otid] = (try row.decode(String?.self, at: 2) ?? "DELIVERED", try row.decode(Bool?.self, at: 3) ?? false)
        }
        return expected
    }

    /// A simulated world whose refund requests come often (every refund asked for first, and
    /// `declinedRate` of paid periods asking and declined), established by `first` at
    /// ``E2E/start``, with the app's consent written (``writeConsent(_:)``).
    struct Setup {
        var world: E2E.World
        var db: PostgresConnection
        var env: [String: String]
        var consent: [String: (delivery: String, sample: Bool)?]
        /// Requests the first command read after their deadline (recorded as expired).
        var lateAtFirst = 0
    }

    static func setUp(subscribers: Int, seed: Int, declinedRate: String, simFlags: [String] = [], env extra: [String: String],
                      first: [String]) async throws -> Setup {
        let world = try await E2E.World.make(subscribers: subscribers, seed: seed, simFlags: [
            "--consumption-request-share", "1", "--refund-declined-rate", declinedRate,
        ] + simFlags, populationLead: 45 * Self.day)
        do {
            let env = world.env.merging(extra) { _, new in new }
            try world.sim.setClock(E2E.iso(E2E.start))
            let r = try await CLIRunner.run(first + ["--as-of", E2E.iso(E2E.start)], environment: env)
            guard r.status == 0 else { throw CLITestError("\(first) at the start exited \(r.status): \(r.stderr.suffix(400))") }
            let db = try world.connect()
            // Issue 40: requests read after their deadline were recorded as expired while the
            // refund line said "0 past their deadline" (or, with only such requests, nothing).
            let late = try db.query("SELECT count(*) FROM churnwatch.refund_requests WHERE policy_branch = 'expired'")[0].decode(Int.self, at: 0)
            if late > 0 {
                #expect(r.stdout.contains("refund requests: ") && r.stdout.contains(", \(late) past their deadline, "),
                        "\(first): \(late) read late: \(r.stdout)")
            }
            return Setup(world: world, db: db, env: env, consent: try Self.writeConsent(db), lateAtFirst: late)
        } catch {
            world.close()
            throw error
        }
    }

    /// `notifications sync` at `t`, the simulator's clock set to it first.
    static func sync(_ setup: Setup, at t: Date, _ extra: [String] = [], env: [String: String]? = nil) async throws -> CLIRunner.Result {
        try setup.world.sim.setClock(E2E.iso(t))
        return try await CLIRunner.run(["notifications", "sync", "--as-of", E2E.iso(t)] + extra, environment: env ?? setup.env)
    }

    /// A population and the minute past the hour the syncs run at.
    struct Case: Sendable, CustomTestStringConvertible {
        var seed: Int
        var subscribers: Int
        var minute: Int
        var testDescription: String { "seed \(seed), \(subscribers) subscribers, syncs at :\(minute)" }
    }

    @Test("three days of hourly syncs: every consented request answered once, in time, with the policy's body; none for the others; Apple's decisions, churnwatch refunds and the metrics agree",
          arguments: [Case(seed: 23, subscribers: 2500, minute: 0), Case(seed: 31, subscribers: 3000, minute: 37)])
    func answeredOnceInTime(_ c: Case) async throws {
        let setup = try await Self.setUp(subscribers: c.subscribers, seed: c.seed, declinedRate: "0.2",
                                         env: ["CHURNWATCH_NOTIFICATIONS": "on", "CHURNWATCH_REFUND_DECLINE_AFTER": "0.5"],
                                         first: ["run", "--status-rate", "5000", "--history-rate", "5000"])
        let (world, db, env, consent) = (setup.world, setup.db, setup.env, setup.consent)
        defer { world.close() }
        #expect(setup.lateAtFirst > 0, "45 days of history hold requests whose deadline passed before the first night")
        let start = E2E.start
        let end = start.addingTimeInterval(3 * Self.day)
        var t = start.addingTimeInterval(Double(c.minute) * 60 + Self.hour)
        var syncs = 0
        while t <= end {
            let r = try await Self.sync(setup, at: t)
            #expect(r.status == 0, "sync at \(E2E.iso(t)): \(r.stderr.suffix(400))")
            syncs += 1
            t = t.addingTimeInterval(Self.hour)
        }
        let requests = try Self.truth(world.sim, from: start, to: end.addingTimeInterval(-13 * Self.hour))
        var problems: [String] = []
        var answered = 0, silent = 0
        for r in requests where r.notified {
            guard let expected = consent[r.original_transaction_id] else { problems.append("\(r.original_transaction_id): not registered"); continue }
            guard let (delivery, sample) = expected else {
                if !r.answers.isEmpty { problems.append("\(r.transaction_id): answered without consent") }
                silent += 1
                continue
            }
            guard r.answers.count == 1, let a = r.answers.first else { problems.append("\(r.transaction_id): \(r.answers.count) answers"); continue }
            answered += 1
            if !a.in_time { problems.append("\(r.transaction_id): answered late (\(a.received_at), deadline \(r.deadline))") }
            let share = try Self.shareElapsed(db, transactionId: r.transaction_id, at: r.requested_at)
            var body: [String: JSONValue] = ["customerConsented": .bool(true), "deliveryStatus": .string(delivery), "sampleContentProvided": .bool(sample)]
            if delivery == "DELIVERED", let share, share >= 0.5 { body["refundPreference"] = .string("DECLINE") }
            if share == nil { problems.append("\(r.transaction_id): its transaction is not stored") }
            if a.body != body { problems.append("\(r.transaction_id): sent \(a.body), expected \(body)") }
        }
        print("refund requests: \(requests.count) in the window, \(answered) answered, \(silent) without consent, over \(syncs) syncs")
        #expect(problems.isEmpty, "\(problems.prefix(10))")
        #expect(answered >= 5 && silent >= 2, "too few requests to mean anything: \(answered) answered, \(silent) silent")

        // Apple's decisions as churnwatch recorded them, against the truth's (decided by the last sync).
        for r in requests where r.notified {
            guard let decided = r.decided_at.flatMap(E2E.parse), decided <= end else { continue }
            let ours = try db.query("SELECT decision FROM churnwatch.refund_requests WHERE transaction_id = \(r.transaction_id) ORDER BY requested_at DESC LIMIT 1")
            let decision = try ours.first?.decode(String?.self, at: 0)
            #expect(decision == (r.decision == "REFUND" ? "refunded" : "declined"), "\(r.transaction_id): ours \(decision ?? "none"), truth \(r.decision ?? "none")")
        }
        let json = try await CLIRunner.run(["refunds", "--json", "--since", E2E.iso(start), "--as-of", E2E.iso(end.addingTimeInterval(-13 * Self.hour))],
                                           environment: env)
        #expect(json.status == 0)
        let counts = try JSONSerialization.jsonObject(with: Data(json.stdout.split(separator: "\n").first.map(String.init)?.utf8 ?? "".utf8)) as? [String: Any]
        #expect(counts?["answered_in_time"] as? Int == answered, "\(json.stdout.prefix(300))")
        #expect(counts?["requests"] as? Int == requests.filter(\.notified).count)

        // The nightly run's metrics file: the last 24 hours' requests by what became of them.
        let dir = try MetricsTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("churnwatch.prom").path
        try world.sim.setClock(E2E.iso(end))
        let night = try await CLIRunner.run(["run", "--as-of", E2E.iso(end), "--status-rate", "5000", "--history-rate", "5000",
                                             "--metrics-file", path], environment: env)
        #expect(night.status == 0, "\(night.stderr.suffix(300))")
        let exposition = try PrometheusText.parse(try String(contentsOfFile: path, encoding: .utf8))
        let since = end.addingTimeInterval(-Self.day)
        for (outcome, sql) in [("answered", "state = 'answered'"), ("expired", "policy_branch = 'expired'"), ("failed", "state = 'failed'")] {
            let n = try db.query(PostgresQuery(stringLiteral: """
                SELECT count(*) FROM churnwatch.refund_requests WHERE \(sql)
                AND requested_at >= '\(E2E.iso(since))' AND requested_at < '\(E2E.iso(end))'
                """))[0].decode(Int.self, at: 0)
            #expect(exposition.value("churnwatch_refund_requests_24h", ["outcome": outcome]) == Double(n), "\(outcome)")
        }
        #expect(exposition.value("churnwatch_refund_requests_24h", ["outcome": "expired"]) == 0, "hourly syncs let none expire")
        #expect((exposition.value("churnwatch_refund_requests_24h", ["outcome": "answered"]) ?? 0) > 0, "nothing to compare in the last day")
    }

    /// How much of its period had passed when the customer asked, from the transaction churnwatch stored.
    static func shareElapsed(_ db: PostgresConnection, transactionId: String, at: String) throws -> Double? {
        guard let requested = E2E.parse(at) else { return nil }
        let rows = try db.query("SELECT purchase_date, expires_date FROM churnwatch.transactions WHERE transaction_id = \(transactionId)")
        guard let row = rows.first, let start = try row.decode(Date?.self, at: 0), let end = try row.decode(Date?.self, at: 1), end > start else {
            return nil
        }
        return min(1, max(0, requested.timeIntervalSince(start) / end.timeIntervalSince(start)))
    }

    @Test("a sync killed while it answers, beside a 429 storm: the next syncs answer every consented request in time, a repeat only with the same body")
    func killedMidAnswerAndRateLimited() async throws {
        let setup = try await Self.setUp(subscribers: 1200, seed: 29, declinedRate: "0.3",
                                         simFlags: ["--rate", "2", "--burst", "2", "--latency-ms", "150"],
                                         env: ["CHURNWATCH_NOTIFICATIONS_LOOKBACK": "1d"], first: ["notifications", "sync"])
        let (world, db, env, consent) = (setup.world, setup.db, setup.env, setup.consent)
        defer { world.close() }
        let start = E2E.start
        // Hourly syncs for half a day, then eleven hours without one: the requests pile up, the
        // oldest an hour from its deadline.
        for hours in 1...12 {
            let r = try await Self.sync(setup, at: start.addingTimeInterval(Double(hours) * Self.hour))
            #expect(r.status == 0 || r.status == 75, "sync at +\(hours) h: \(r.status) \(r.stderr.suffix(300))")
        }
        let quiet = start.addingTimeInterval(12 * Self.hour)
        let late = quiet.addingTimeInterval(11 * Self.hour)
        try world.sim.setClock(E2E.iso(late))
        let args = ["notifications", "sync", "--as-of", E2E.iso(late)]
        let scratch = world.db
        // All on one thread, so nothing waits for a cooperative thread while the sync works.
        let (sending, killed) = try await OwnThread.run { () throws -> (Bool, Harness.Ended) in
            let running = try RunningCLI(args, environment: env)
            let sending = try Harness.waitUntil(timeout: 120) {
                try db.query("SELECT count(*) FROM churnwatch.refund_requests WHERE state = 'sending'")[0].decode(Int.self, at: 0) > 0
                    || !running.process.isRunning
            }
            let killed = Harness.signalAndWait(running, SIGKILL)
            _ = try Harness.waitForNoAdvisoryLocks(scratch)
            return (sending, killed)
        }
        #expect(sending && killed.bySignal, "the sync ended before an answer was under way: \(killed.result.stderr.suffix(300))")
        // The next syncs, past the dead sync's lease (5 minutes), finish the work before the deadlines.
        for minutes in [10.0, 20, 30, 40] {
            let r = try await Self.sync(setup, at: late.addingTimeInterval(minutes * 60))
            #expect(r.status == 0 || r.status == 75, "sync at +\(minutes) min: \(r.status) \(r.stderr.suffix(300))")
        }
        let requests = try Self.truth(world.sim, from: quiet, to: late)
        var answered = 0, repeated = 0
        for r in requests where r.notified {
            guard case .some(.some) = consent[r.original_transaction_id] else {
                #expect(r.answers.isEmpty, "\(r.transaction_id) answered without consent")
                continue
            }
            guard let deadline = E2E.parse(r.deadline), deadline > late.addingTimeInterval(40 * 60) else { continue }
            #expect(!r.answers.isEmpty, "\(r.transaction_id) (requested \(r.requested_at)) never answered")
            let allInTime = r.answers.allSatisfy { $0.in_time }
            #expect(allInTime, "\(r.transaction_id) answered late")
            let sameBody = r.answers.allSatisfy { $0.body == r.answers[0].body }
            #expect(sameBody, "\(r.transaction_id): different bodies \(r.answers.map(\.body))")
            answered += r.answers.isEmpty ? 0 : 1
            repeated += max(0, r.answers.count - 1)
        }
        print("killed mid-answer: \(answered) requests answered, \(repeated) answered twice (sent before the kill, recorded after)")
        #expect(answered >= 2, "too few requests to mean anything: \(answered)")
        #expect(repeated <= 1, "only the request in flight at the kill may be sent twice: \(repeated)")
        let stats = try JSONSerialization.jsonObject(with: try world.sim.request("GET", "/_sim/stats")) as? [String: Any]
        #expect((stats?["rate_limited"] as? Int ?? 0) > 0, "no 429 at all: not a storm")
        let open = try db.query("SELECT count(*) FROM churnwatch.refund_requests WHERE state IN ('pending', 'sending') AND deadline > \(late.addingTimeInterval(40 * 60))")
        let stillOpen = try open[0].decode(Int.self, at: 0)
        #expect(stillOpen == 0)
    }

    @Test("Apple unreachable when the answers go out: each open request is tried once by that sync and stays pending, and the next sync answers it in time")
    func unreachableThenAnswered() async throws {
        let setup = try await Self.setUp(subscribers: 1200, seed: 29, declinedRate: "0.3", env: ["CHURNWATCH_NOTIFICATIONS_LOOKBACK": "1d"],
                                         first: ["notifications", "sync"])
        let (world, db, env, consent) = (setup.world, setup.db, setup.env, setup.consent)
        defer { world.close() }
        let start = E2E.start
        // A day's requests read but not answered (answers off), then a sync whose Apple is gone.
        let read = start.addingTimeInterval(23 * Self.hour)
        let recorded = try await Self.sync(setup, at: read, ["--refund-answers", "off"])
        #expect(recorded.status == 0, "\(recorded.stderr.suffix(300))")
        let gone = env.merging(["APPSTORE_BASE_URL": "http://127.0.0.1:9", "APPSTORE_SANDBOX_BASE_URL": "http://127.0.0.1:9",
                                "APPSTORE_MAX_ATTEMPTS": "2", "APPSTORE_MAX_RETRY_WAIT": "2"]) { _, new in new }
        let down = try await Self.sync(setup, at: read.addingTimeInterval(600), ["--max-duration", "120s"], env: gone)
        #expect(down.status == 75, "\(down.status): \(down.stderr.suffix(300))")
        let open = try db.query("""
            SELECT original_transaction_id, attempts, last_error IS NOT NULL FROM churnwatch.refund_requests
            WHERE state = 'pending' AND deadline > \(read.addingTimeInterval(1200))
            """).map { (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1), try $0.decode(Bool.self, at: 2)) }
        let consented = open.filter { consent[$0.0].map { $0 != nil } ?? false }
        #expect(consented.count >= 2, "too few open consented requests to mean anything: \(open)")
        for (otid, attempts, hasError) in consented {
            #expect(attempts == 1 && hasError, "\(otid): \(attempts) attempts by the sync that could not reach Apple")
        }
        // Apple is back: the next sync answers each of them once, in time.
        let r = try await Self.sync(setup, at: read.addingTimeInterval(1200))
        #expect(r.status == 0, "\(r.stderr.suffix(300))")
        let truth = Dictionary(try Self.truth(world.sim, from: start, to: read).map { ($0.original_transaction_id, $0) }) { a, _ in a }
        for (otid, _, _) in consented {
            let answers = truth[otid]?.answers ?? []
            #expect(answers.count == 1 && answers.allSatisfy { $0.in_time }, "\(otid): \(answers.count) answers")
        }
    }
}
