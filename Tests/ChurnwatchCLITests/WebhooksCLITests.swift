import Foundation
import Postgres
import Testing

/// `churnwatch webhooks` as operators run it, against ops/webhook_receiver.py on loopback: real
/// HTTP, real Standard Webhooks signatures checked by the receiver's own implementation.
@Suite("churnwatch webhooks (the binary, a receiver on loopback)")
struct WebhooksCLITests {
    struct Setup {
        let db: ScratchDatabase
        let connection: PostgresConnection
        var env: [String: String] { ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"] }

        static func make() async throws -> Setup {
            let db = try ScratchDatabase.create()
            let r = try await CLIRunner.run(["migrate"], environment: ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"])
            guard r.status == 0 else { db.drop(); throw CLITestError("migrate failed: \(r.stderr)") }
            let connection = try PostgresConnection(connectionString: db.connectionURL, logger: .postgres)
            try connection.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id, customer_ref) SELECT 'h' || i, 'ref-' || i FROM generate_series(1, 10) i")
            try connection.execute("""
                INSERT INTO churnwatch.subscription_segments (original_transaction_id, segment, segment_since)
                SELECT 'h' || i, 'active', now() FROM generate_series(1, 10) i
                """)
            return Setup(db: db, connection: connection)
        }

        func run(_ args: [String]) async throws -> CLIRunner.Result { try await CLIRunner.run(args, environment: env) }

        /// `webhooks add`, returning the secret it printed.
        func add(_ name: String, url: String, _ extra: [String] = ["--allow-http", "--allow-private"]) async throws -> String {
            let r = try await run(["webhooks", "add", name, "--url", url] + extra)
            guard r.status == 0, let line = r.stdout.split(separator: "\n").first(where: { $0.hasPrefix("secret: ") }) else {
                throw CLITestError("webhooks add failed: \(r.stderr)")
            }
            return String(line.dropFirst("secret: ".count))
        }

        /// `n` events for each of the first `subscriptions` subscriptions, in order per subscription.
        func events(_ kinds: [String], subscriptions: Int = 10) throws {
            for (i, kind) in kinds.enumerated() {
                try connection.execute("""
                    INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at)
                    SELECT 'h' || s, \(kind), clock_timestamp() + make_interval(secs => \(i)), now() FROM generate_series(1, \(subscriptions)) s
                    """)
            }
        }

        func count(_ sql: String) throws -> Int { try connection.query(PostgresQuery(stringLiteral: sql))[0].decode(Int.self, at: 0) }
    }

    @Test("add prints the secret once (list shows a fingerprint), refuses http without --allow-http and a taken name; test reaches the receiver; set, disable, enable, remove")
    func endpoints() async throws {
        let setup = try await Setup.make()
        defer { setup.db.drop() }
        let refused = try await setup.run(["webhooks", "add", "crm", "--url", "http://127.0.0.1:9/h"])
        #expect(refused.status == 78 && refused.stderr.contains("--allow-http"), "\(refused.stderr)")
        let secret = try await setup.add("crm", url: "http://127.0.0.1:9/h")
        #expect(secret.hasPrefix("whsec_") && Data(base64Encoded: String(secret.dropFirst(6)))?.count == 32)
        let again = try await setup.run(["webhooks", "add", "crm", "--url", "https://example.com/h"])
        #expect(again.status == 78 && again.stderr.contains("exists already"), "\(again.stderr)")
        let list = try await setup.run(["webhooks", "list"])
        #expect(list.status == 0 && list.stdout.contains("crm → http://127.0.0.1:9/h") && !list.stdout.contains(secret), "\(list.stdout)")
        let receiver = try WebhookReceiverProcess.start(secrets: [secret])
        defer { receiver.stop() }
        #expect(try await setup.run(["webhooks", "set", "crm", "--url", receiver.url, "--types", "churn_event.created"]).status == 0)
        let test = try await setup.run(["webhooks", "test", "crm"])
        #expect(test.status == 0 && test.stdout.contains("HTTP 200"), "\(test.stdout) \(test.stderr)")
        #expect(try receiver.stats().valid == 1 && receiver.stats().by_type["webhook.test"] == 1)
        #expect(try await setup.run(["webhooks", "disable", "crm"]).status == 0)
        #expect(try await setup.run(["webhooks", "list"]).stdout.contains("DISABLED"))
        #expect(try await setup.run(["webhooks", "enable", "crm"]).status == 0)
        // Without --allow-private, loopback is refused before any request.
        _ = try await setup.run(["webhooks", "set", "crm", "--no-allow-private"])
        let privateRefused = try await setup.run(["webhooks", "test", "crm"])
        #expect(privateRefused.status == 69 && privateRefused.stderr.contains("loopback"), "\(privateRefused.stderr)")
        #expect(try receiver.stats().deliveries == 1)
        #expect(try await setup.run(["webhooks", "remove", "crm"]).status == 0)
        #expect(try await setup.run(["webhooks", "remove", "crm"]).status == 78)
    }

    @Test("send delivers every message once valid and in order per subscription, through 500s, a closed connection and a 429 with Retry-After; only types asked for")
    func sendThroughFailures() async throws {
        let setup = try await Setup.make()
        defer { setup.db.drop() }
        let secret = try await setup.add("crm", url: "http://127.0.0.1:9/hook", ["--allow-http", "--allow-private", "--types", "churn_event.created"])
        let live = try WebhookReceiverProcess.start(secrets: [secret])
        defer { live.stop() }
        _ = try await setup.run(["webhooks", "set", "crm", "--url", live.url])
        try setup.events(["renewed", "auto_renew_disabled", "auto_renew_enabled"])
        try setup.connection.execute("UPDATE churnwatch.subscription_segments SET segment = 'will_not_renew'")
        // Rules stack: the one for /hook first (7 answers of 500), then the one beneath it (3
        // connections closed without an answer), then 200.
        try live.control(#"{"mode": "close", "path": "/", "count": 3}"#)
        try live.control(#"{"mode": "500", "path": "/hook", "count": 7}"#)
        // Zero waits: every retry is due at once, so one send sees each failure and its retry.
        let send = try await setup.run(["webhooks", "send", "--webhook-retry-schedule", "0,0,0,0,0,0,0,0,0,0,0,0"])
        #expect(send.status == 0 && send.stdout.contains("30 delivered"), "\(send.stdout) \(send.stderr)")
        var stats = try live.stats()
        #expect(stats.unique_ids == 30 && stats.valid == stats.accepted && stats.invalid == 0)
        #expect(stats.order_violations == 0 && stats.duplicate_ids_with_other_body == 0)
        #expect(stats.by_type == ["churn_event.created": 30], "segment.changed is not a type it asked for")
        #expect(try setup.count("SELECT count(*) FROM churnwatch.webhook_deliveries WHERE state = 'delivered'") == 30)
        // 429 with Retry-After: the endpoint waits at least that long, not only the message.
        try live.control(#"{"mode": "429", "retry_after": 30, "count": 1}"#)
        try setup.events(["expired"], subscriptions: 1)
        let paused = try await setup.run(["webhooks", "send"])
        #expect(paused.status == 0 && paused.stdout.contains("0 delivered, 1 failed"), "\(paused.stdout)")
        #expect(try setup.count("SELECT count(*) FROM churnwatch.webhook_endpoints WHERE paused_until > now() + interval '20 seconds'") == 1)
        stats = try live.stats()
        #expect(stats.deliveries == 30 + 7 + 3 + 1, "nothing more was sent during the pause: \(stats.deliveries)")
    }

    @Test("410 disables the endpoint; a redirect is not followed; a 1 GiB answer and a receiver slower than the timeout cost bounded time; a dead delivery is replayed with the same id and body")
    func hostileReceivers() async throws {
        let setup = try await Setup.make()
        defer { setup.db.drop() }
        let secret = try await setup.add("crm", url: "http://127.0.0.1:9/hook")
        let receiver = try WebhookReceiverProcess.start(secrets: [secret])
        defer { receiver.stop() }
        _ = try await setup.run(["webhooks", "set", "crm", "--url", receiver.url, "--types", "churn_event.created"])
        try setup.events(["renewed"], subscriptions: 1)
        try receiver.control(#"{"mode": "huge", "count": 1}"#)
        let started = Date()
        #expect(try await setup.run(["webhooks", "send"]).stdout.contains("1 delivered"))
        #expect(Date().timeIntervalSince(started) < 20, "a 1 GiB answer is not read")
        try receiver.control(#"{"mode": "redirect"}"#)
        try setup.events(["expired"], subscriptions: 1)
        let redirected = try await setup.run(["webhooks", "send", "--webhook-retry-schedule", "0,0"])
        #expect(redirected.stdout.contains("1 dead") && redirected.stderr.contains("redirect, not followed"), "\(redirected.stdout) \(redirected.stderr)")
        try receiver.control(#"{"mode": "slow", "delay_ms": 20000}"#)
        try setup.events(["renewed"], subscriptions: 2)
        let slowStart = Date()
        let slow = try await setup.run(["webhooks", "send", "--webhook-timeout", "1s", "--webhook-retry-schedule", "0"])
        #expect(slow.stdout.contains("2 dead") && Date().timeIntervalSince(slowStart) < 15, "\(slow.stdout)")
        try receiver.control(#"{"mode": "410"}"#)
        try setup.events(["auto_renew_disabled"], subscriptions: 3)
        let gone = try await setup.run(["webhooks", "send"])
        #expect(gone.stdout.contains("1 endpoints gone") && gone.stderr.contains("410"), "\(gone.stdout) \(gone.stderr)")
        #expect(try await setup.run(["webhooks", "list"]).stdout.contains("DISABLED (the receiver answered 410 Gone"))
        // Fixed: enabled again, its waiting delivery goes on; replay sends the dead ones again.
        try receiver.control(#"{"mode": "ok"}"#)
        #expect(try await setup.run(["webhooks", "enable", "crm"]).status == 0)
        let replay = try await setup.run(["webhooks", "replay", "crm", "--since", "1h"])
        #expect(replay.status == 0 && replay.stdout.contains("replay: 4 messages"), "\(replay.stdout) \(replay.stderr)")
        let after = try await setup.run(["webhooks", "send"])
        let undelivered = try setup.count("SELECT count(*) FROM churnwatch.webhook_deliveries WHERE state <> 'delivered'")
        #expect(after.stdout.contains("delivered") && undelivered == 0, "\(after.stdout)")
        let stats = try receiver.stats()
        #expect(stats.duplicate_ids_with_other_body == 0 && stats.order_violations == 0 && stats.invalid == 0)
    }

    @Test("rotate-secret: the old secret signs beside the new one for --keep-old, so a receiver holding either verifies")
    func rotation() async throws {
        let setup = try await Setup.make()
        defer { setup.db.drop() }
        let old = try await setup.add("crm", url: "http://127.0.0.1:9/hook")
        let rotated = try await setup.run(["webhooks", "rotate-secret", "crm", "--keep-old", "1h"])
        let new = rotated.stdout.split(separator: "\n").first { $0.hasPrefix("secret: ") }.map { String($0.dropFirst(8)) } ?? ""
        #expect(rotated.status == 0 && new.hasPrefix("whsec_") && new != old, "\(rotated.stdout)")
        for secrets in [[old], [new]] {
            let receiver = try WebhookReceiverProcess.start(secrets: secrets)
            defer { receiver.stop() }
            _ = try await setup.run(["webhooks", "set", "crm", "--url", receiver.url])
            #expect(try await setup.run(["webhooks", "test", "crm"]).status == 0)
            #expect(try receiver.stats().valid == 1)
        }
        _ = try await setup.run(["webhooks", "rotate-secret", "crm", "--keep-old", "0"])
        let stale = try WebhookReceiverProcess.start(secrets: [new])
        defer { stale.stop() }
        _ = try await setup.run(["webhooks", "set", "crm", "--url", stale.url])
        _ = try await setup.run(["webhooks", "test", "crm"])
        #expect(try stale.stats().invalid == 1, "a secret rotated out with --keep-old 0 no longer signs")
    }
}
