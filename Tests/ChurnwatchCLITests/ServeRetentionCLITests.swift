import AppStoreModels
import Foundation
import Postgres
import Testing

/// `POST /apple/retention-message`: Apple's Get Retention Message requests, signed by the
/// simulator's chain, answered by `churnwatch serve` from the rules of `churnwatch messages`.
@Suite("churnwatch serve: the cancel page", .serialized)
struct ServeRetentionCLITests {
    typealias E2E = NightlyRunEndToEndTests
    typealias Server = ServeCLITests.Server
    static let path = "/apple/retention-message"
    static let (m0, m1, m2, m3) = ("00000000-0000-4000-8000-000000000000", "11111111-1111-4111-8111-111111111111",
                                   "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333")

    /// A subscription as the database knows it after a night, and what the rules should answer.
    struct Subscriber {
        var otid: String, product: String, segment: String?, tenureDays: Int?, draw: Double
    }

    /// A database polled once, on its own cluster (so that the test can stop it), with the rules set.
    struct Setup {
        let cluster: PrivateCluster
        let sim: SimulatorProcess
        let env: [String: String]

        static func make(seed: Int) async throws -> Setup {
            let cluster = try PrivateCluster.start()
            let sim = try await SimulatorProcess.start(subscribers: 300, seed: seed, start: E2E.iso(E2E.start.addingTimeInterval(-120 * E2E.day)))
            var env = sim.environment
            env["DATABASE_URL"] = cluster.url
            let setup = Setup(cluster: cluster, sim: sim, env: env)
            for args in [["migrate"], ["import", sim.subscriptionsCSV.path]] {
                let r = try await CLIRunner.run(args, environment: env)
                guard r.status == 0 else { setup.close(); throw CLITestError("\(args[0]): \(r.stderr.suffix(400))") }
            }
            try sim.setClock(E2E.iso(E2E.start))
            let night = try await CLIRunner.run(["run", "--as-of", E2E.iso(E2E.start), "--notifications", "off",
                                                 "--status-rate", "5000", "--history-rate", "5000"], environment: env)
            guard night.status == 0 else { setup.close(); throw CLITestError("run: \(night.stderr.suffix(400))") }
            for m in [m0, m1, m2, m3] { try await upload(m, env) }
            let rules: [[String]] = [
                ["rules", "set", "--name", "save", "--priority", "10", "--kind", "promotional_offer", "--message", m1, "--offer-id", "save50",
                 "--segments", "will_not_renew,grace_period,billing_retry,churned_voluntary", "--holdout", "0.5"],
                ["rules", "set", "--name", "everyone", "--kind", "message", "--message", m3, "--locales", "en", "--holdout", "0.2"],
                ["default", "set", "--message", m0],
            ]
            for r in rules {
                let result = try await CLIRunner.run(["messages"] + r, environment: env)
                guard result.status == 0 else { setup.close(); throw CLITestError("messages \(r[0...1]): \(result.stderr)") }
            }
            return setup
        }

        func close() {
            sim.stop()
            cluster.destroy()
        }

        func connect() throws -> PostgresConnection { try PostgresConnection(connectionString: cluster.url, logger: .postgres) }

        func subscribers(at: Date) throws -> [Subscriber] {
            try connect().query("""
                SELECT s.original_transaction_id AS id, s.product_id, g.segment,
                       floor((extract(epoch FROM \(at)::timestamptz) * 1000 - (s.snapshot->>'original_purchase_date_ms')::bigint) / 86400000)::int AS tenure,
                       churnwatch.holdout_draw(s.original_transaction_id, 'cancel_page', '') AS draw
                FROM churnwatch.subscriptions s LEFT JOIN churnwatch.subscription_segments g USING (original_transaction_id)
                WHERE s.product_id IS NOT NULL ORDER BY 1
                """).map {
                Subscriber(otid: try $0.decode(String.self, "id"), product: try $0.decode(String.self, "product_id"),
                           segment: try $0.decode(String?.self, "segment"), tenureDays: try $0.decode(Int?.self, "tenure"),
                           draw: try $0.decode(Double.self, "draw"))
            }
        }

        /// A request signed by the simulator's chain.
        func signed(_ s: Subscriber, at: Date, locale: String = "en-US", request: String = UUID().uuidString, appAppleId: Int64? = nil) throws -> String {
            try ServeRetentionCLITests.signed(sim, s, at: at, locale: locale, request: request, appAppleId: appAppleId)
        }
    }

    /// A request signed by `sim`'s chain.
    static func signed(_ sim: SimulatorProcess, _ s: Subscriber, at: Date, locale: String = "en-US", request: String = UUID().uuidString,
                       appAppleId: Int64? = nil) throws -> String {
        var body: [String: Any] = ["original_transaction_id": s.otid, "product_id": s.product, "user_locale": locale,
                                   "request_identifier": request, "signed_date": E2E.iso(at)]
        if let appAppleId { body["app_apple_id"] = appAppleId }
        let data = try sim.request("POST", "/_sim/realtime/sign", body: try JSONSerialization.data(withJSONObject: body))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: String])["signedPayload"] ?? ""
    }

    /// A message uploaded to the simulator's Retention Messaging API (approved at once).
    static func upload(_ id: String, _ env: [String: String]) async throws {
        let r = try await CLIRunner.run(["messages", "upload", "--message", id, "--header", "Before you go",
                                         "--body", "Stay with us: \(id.prefix(8))"], environment: env)
        guard r.status == 0 else { throw CLITestError("messages upload \(id): \(r.stderr)") }
    }

    /// Waits (bounded) until `n` requests are recorded: records follow their answers by moments.
    static func recorded(_ db: PostgresConnection, _ n: Int, within seconds: TimeInterval = 30) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.retention_message_requests") == n { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    static func post(_ server: Server, _ payload: String) throws -> (status: Int?, body: String) {
        try RawHTTP.exchange(port: server.port, method: "POST", path: path, body: "{\"signedPayload\":\"\(payload)\"}")
    }

    /// What the rules above answer: (kind, message), with the database's facts or without them.
    static func expected(_ s: Subscriber, locale: String, factsKnown: Bool, loyalDays: Int = .max) -> (kind: String, message: String) {
        let risky = ["will_not_renew", "grace_period", "billing_retry", "churned_voluntary"]
        if factsKnown, let seg = s.segment, risky.contains(seg) { return s.draw < 0.5 ? ("message", m0) : ("promotionalOffer", m1) }
        if factsKnown, let days = s.tenureDays, days >= loyalDays { return ("alternateProduct", m2) }
        if locale.hasPrefix("en") { return s.draw < 0.2 ? ("message", m0) : ("message", m3) }
        return ("message", m0)
    }

    /// The same JSON (the database keeps the answer as jsonb, which spaces it its own way).
    static func same(_ a: String, _ b: String) throws -> Bool {
        let (x, y) = (try JSONSerialization.jsonObject(with: Data(a.utf8)), try JSONSerialization.jsonObject(with: Data(b.utf8)))
        return (x as? NSDictionary) == (y as? NSDictionary) && x is NSDictionary
    }

    /// The answer's one member and its message; nil when it is not exactly one.
    static func decode(_ body: String) throws -> (kind: String, message: String, member: [String: Any])? {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        guard object.count == 1, let (kind, value) = object.first, let member = value as? [String: Any],
              let message = member["messageIdentifier"] as? String else { return nil }
        return (kind, message, member)
    }

    @Test("every subscriber's request is answered by the first matching rule (segment, tenure, locale), the holdout by the default message with the same draw as the win-back queue, a promotional offer signed for the request's product; a retried request gets the same answer from either of two serve processes; each request is recorded once and logged as cancel_page_viewed, those answered just before SIGTERM too; forged, another chain, another app, stale, a bad and a huge body are refused")
    func answersByTheRules() async throws {
        let setup = try await Setup.make(seed: 17)
        defer { setup.close() }
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let subscribers = try setup.subscribers(at: now)
        #expect(subscribers.count > 200)
        // Loyal: the longer-subscribed half (a rule on tenure, below the segment rule).
        let loyalDays = subscribers.compactMap(\.tenureDays).sorted()[subscribers.count / 2]
        let loyal = try await CLIRunner.run(["messages", "rules", "set", "--name", "loyal", "--priority", "20", "--kind", "alternate_product",
                                             "--message", Self.m2, "--alternate-product", "com.example.yearly", "--min-tenure-days", String(loyalDays)],
                                            environment: setup.env)
        #expect(loyal.status == 0, "\(loyal.stderr)")
        // A budget a loaded test machine cannot exhaust: every answer here is chosen with the facts.
        let server = try await Server.start(setup.env, extra: ["--answer-within", "5s"])
        defer { server.kill() }
        let second = try await Server.start(setup.env, extra: ["--answer-within", "5s"])
        defer { second.kill() }
        var seen: [String: Int] = [:]
        var payloads: [(String, String)] = []
        for (i, s) in subscribers.enumerated() {
            let locale = i % 7 == 0 ? "fr-FR" : "en-US"
            let payload = try setup.signed(s, at: now, locale: locale)
            let answer = try Self.post(server, payload)
            #expect(answer.status == 200, "\(s.otid): \(answer)")
            guard let got = try Self.decode(answer.body) else { Issue.record("\(s.otid): not one member: \(answer.body)"); continue }
            let want = Self.expected(s, locale: locale, factsKnown: true, loyalDays: loyalDays)
            #expect(got.kind == want.kind && got.message == want.message, "\(s.otid) \(s.segment ?? "-") \(s.tenureDays ?? -1) \(s.draw): \(answer.body)")
            if got.kind == "promotionalOffer" {
                let jws = try #require(got.member["promotionalOfferSignatureV2"] as? String)
                let claims = try #require(try JSONSerialization.jsonObject(with: ServeCLITests.base64URL(String(jws.split(separator: ".")[1]))) as? [String: Any])
                #expect(claims["productId"] as? String == s.product && claims["offerIdentifier"] as? String == "save50")
                #expect(claims["bid"] as? String == setup.env["APPSTORE_BUNDLE_ID"])
            }
            if got.kind == "alternateProduct" { #expect(got.member["productId"] as? String == "com.example.yearly") }
            seen[got.kind + " " + got.message, default: 0] += 1
            payloads.append((payload, answer.body))
        }
        print("cancel page: \(subscribers.count) requests answered: \(seen.sorted { $0.key < $1.key })")
        #expect(seen.count >= 4, "the population exercised too few rules: \(seen)")

        // Apple's retry of a request: the same answer, from this process and from another.
        for (payload, body) in payloads.prefix(40) {
            #expect(try Self.post(server, payload).body == body)
            #expect(try Self.same(try Self.post(second, payload).body, body), "another process answered a retry otherwise")
        }
        let db = try setup.connect()
        #expect(try await Self.recorded(db, subscribers.count), "the answers were not all recorded")
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.churn_events WHERE event = 'cancel_page_viewed'") == subscribers.count)
        #expect(try ServeCLITests.count(db, """
            SELECT count(*) FROM churnwatch.retention_message_requests
            WHERE (arm = 'holdout') <> (rule_name IS NOT NULL AND answer->'message'->>'messageIdentifier' = \(Self.m0))
            """) == 0, "an arm disagrees with its answer")

        try await Self.expectRefusals(server, setup: setup, subscriber: subscribers[0], now: now)
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.retention_message_requests") == subscribers.count)
        let metrics = try RawHTTP.exchange(port: server.port, method: "GET", path: "/metrics").body
        #expect(metrics.contains("churnwatch_serve_retention_rejected_total{reason=\"stale\"} 1"), "\(metrics.suffix(2500))")
        #expect(metrics.contains("churnwatch_serve_retention_rejected_total{reason=\"verification\"} 2"))
        #expect(metrics.contains("churnwatch_serve_retention_rejected_total{reason=\"unknown_app\"} 1"))
        // SIGTERM right after answers: their records are written before serve exits.
        for s in subscribers.prefix(5) { #expect(try Self.post(server, try setup.signed(s, at: now)).status == 200) }
        for s in [server, second] { #expect(try await s.stop().status == 0) }
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.retention_message_requests") == subscribers.count + 5)
    }

    static func expectRefusals(_ server: Server, setup: Setup, subscriber s: Subscriber, now: Date) async throws {
        var parts = try setup.signed(s, at: now).split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        let forged = try post(server, parts.joined(separator: "."))
        #expect(forged.status == 403, "a forged signature: \(forged)")
        let stale = try post(server, try setup.signed(s, at: now.addingTimeInterval(-600)))
        #expect(stale.status == 403 && stale.body.contains("signed 6"), "signed 10 minutes ago: \(stale)")
        let other = try post(server, try setup.signed(s, at: now, appAppleId: 999))
        #expect(other.status == 403 && other.body.contains("no app"), "another app: \(other)")
        let stranger = try await SimulatorProcess.start(subscribers: 20, seed: 3, start: E2E.iso(E2E.start))
        defer { stranger.stop() }
        let theirs = Setup(cluster: setup.cluster, sim: stranger, env: setup.env)
        let strangerSub = Subscriber(otid: try #require(try theirs.sim.truth(at: E2E.iso(E2E.start)).keys.first), product: s.product,
                                     segment: nil, tenureDays: nil, draw: 0)
        let chain = try post(server, try theirs.signed(strangerSub, at: now, appAppleId: Int64(setup.env["APPSTORE_APP_APPLE_ID"] ?? "")))
        #expect(chain.status == 403 && chain.body.contains("did not verify"), "another team's chain: \(chain)")
        #expect(try RawHTTP.exchange(port: server.port, method: "POST", path: path, body: "{\"nothing\": 1}").status == 400)
        let huge = try RawHTTP.exchange(port: server.port, method: "POST", path: path,
                                        body: "{\"signedPayload\":\"" + String(repeating: "A", count: 200_000) + "\"}")
        #expect(huge.status == 413, "a huge body: \(huge.status ?? 0)")
    }

    @Test("`messages rules set` refuses a bad rule with one line and exit 78, and changes nothing: a message Apple does not know, an unknown kind or segment, a missing offer id, a message that is not a UUID, a holdout of 1")
    func badRules() async throws {
        let world = try await E2E.World.make(subscribers: 20, seed: 2)
        defer { world.close() }
        try await Self.upload(Self.m1, world.env)
        let base = ["messages", "rules", "set", "--name", "r"]
        let bad: [([String], String)] = [
            (["--kind", "message", "--message", Self.m2], "not one of this app's at Apple"),
            (["--kind", "banner", "--message", Self.m1], "--kind"),
            (["--kind", "message", "--message", Self.m1, "--segments", "angry"], "--segments"),
            (["--kind", "promotional_offer", "--message", Self.m1], "--offer-id"),
            (["--kind", "message", "--message", "hello"], "--message"),
            (["--kind", "message", "--message", Self.m1, "--holdout", "1"], "--holdout"),
        ]
        for (args, named) in bad {
            let r = try await CLIRunner.run(base + args, environment: world.env)
            let lines = r.stderr.split(separator: "\n")
            #expect(r.status == 78 && lines.count == 1 && r.stderr.contains(named), "\(args): \(r.status) \(r.stderr)")
        }
        #expect(try ServeCLITests.count(try world.connect(), "SELECT count(*) FROM churnwatch.retention_rules") == 0)
        let listed = try await CLIRunner.run(["messages", "rules", "list"], environment: world.env)
        #expect(listed.status == 0 && listed.stdout.contains("no rules"), "\(listed)")
    }

    @Test("a rule set or removed while serve runs is used from the next request on, without a restart; a product's default is set and removed at Apple and here")
    func rulesReadAgain() async throws {
        let world = try await E2E.World.make(subscribers: 40, seed: 5)
        defer { world.close() }
        #expect(try await world.night(E2E.start, extra: ["--notifications", "off"]).status == 0)
        // What is read again is checked here, not the budget (ops/bench serve times that): under the
        // full suite's load a lookup past 40 % of 300 ms answered from the cached rules (a 204).
        let server = try await Server.start(world.env, extra: ["--answer-within", "5s"])
        defer { server.kill() }
        let otid = try world.connect().query("SELECT original_transaction_id, product_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL LIMIT 1")[0]
        let s = Subscriber(otid: try otid.decode(String.self, at: 0), product: try otid.decode(String.self, at: 1), segment: nil, tenureDays: nil, draw: 0)
        #expect(try Self.post(server, try Self.signed(world.sim, s, at: Date())).status == 204, "no rule and no default yet")
        try await Self.upload(Self.m3, world.env)
        let set = try await CLIRunner.run(["messages", "rules", "set", "--name", "everyone", "--kind", "message", "--message", Self.m3], environment: world.env)
        #expect(set.status == 0, "\(set.stderr)")
        // The very next request: its lookup sees the rules' new version and reads them first.
        let answer = try Self.post(server, try Self.signed(world.sim, s, at: Date()))
        #expect(answer.status == 200 && answer.body.contains(Self.m3), "the new rule was not used: \(answer)")
        let removed = try await CLIRunner.run(["messages", "rules", "remove", "--name", "everyone"], environment: world.env)
        #expect(removed.status == 0 && removed.stdout.contains("removed 1"))
        #expect(try Self.post(server, try Self.signed(world.sim, s, at: Date())).status == 204, "a removed rule was still used")
        // A default for a product and locale is Apple's too: set, then removed there and here.
        let product = ["--product", s.product, "--locale", "en-US"]
        let defaultSet = try await CLIRunner.run(["messages", "default", "set", "--message", Self.m3] + product, environment: world.env)
        #expect(defaultSet.status == 0, "\(defaultSet.stderr)")
        let answered = try Self.post(server, try Self.signed(world.sim, s, at: Date()))
        #expect(answered.status == 200 && answered.body.contains(Self.m3), "the default was not answered: \(answered)")
        for expected in ["removed 1", "removed 0"] {
            let r = try await CLIRunner.run(["messages", "default", "remove"] + product, environment: world.env)
            #expect(r.status == 0 && r.stdout.contains(expected), "\(r.stdout) \(r.stderr)")
        }
        #expect(try await server.stop().status == 0)
    }

    @Test("the database stopped: every request is still answered, within the budget, by the cached rules that need no database (product, locale) or the default; the answers are recorded once it is back")
    func databaseDown() async throws {
        let setup = try await Setup.make(seed: 23)
        defer { setup.close() }
        let server = try await Server.start(setup.env, extra: ["--answer-within", "300ms"])
        defer { server.kill() }
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let subscribers = Array(try setup.subscribers(at: now).prefix(60))
        let signed = try subscribers.enumerated().map { (i, s) in (s, i % 5 == 0 ? "de-DE" : "en-GB", try setup.signed(s, at: now, locale: i % 5 == 0 ? "de-DE" : "en-GB")) }
        try setup.cluster.stop()
        var slowest = 0.0
        for (s, locale, payload) in signed {
            let started = Date()
            let answer = try Self.post(server, payload)
            slowest = max(slowest, Date().timeIntervalSince(started))
            #expect(answer.status == 200, "\(answer)")
            let got = try Self.decode(answer.body)
            let want = Self.expected(s, locale: locale, factsKnown: false)
            #expect(got?.kind == want.kind && got?.message == want.message, "\(s.otid) without the database: \(answer.body)")
        }
        // How fast is the bench's (retention_answer_p99_ms_db_down); here, that each was answered
        // from what serve holds: counted as chosen without the database's facts.
        print("cancel page, database down: \(signed.count) answered, slowest \(Int(slowest * 1000)) ms")
        let metrics = try RawHTTP.exchange(port: server.port, method: "GET", path: "/metrics")
        let without = metrics.body.split(separator: "\n").filter { $0.hasPrefix("churnwatch_serve_retention_without_facts_total") }
            .compactMap { Double($0.split(separator: " ").last ?? "") }.reduce(0, +)
        #expect(Int(without) >= signed.count, "answers chosen without the database's facts: \(without) of \(signed.count)")
        try setup.cluster.startAgain()
        let db = try setup.connect()
        #expect(try await Self.recorded(db, signed.count), "not every answer was recorded after the database came back")
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.retention_message_requests WHERE facts_known") == 0)
        #expect(try await server.stop().status == 0)
    }
}
