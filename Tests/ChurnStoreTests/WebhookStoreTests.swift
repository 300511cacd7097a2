import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// The webhook tables (issue 49): messages written with their facts, numbered in commit order,
/// one line per subscription and endpoint, leases, settling, replay, win-back consumers.
@Suite("webhooks in the store")
struct WebhookStoreTests {
    static let app = "com.example.churnwatch"

    static func setUp(_ fresh: FreshDatabase, endpoints: [WebhookEndpoint]) async throws -> (PostgresConnection, DatabaseStore) {
        let db = try WinbackQueueTests.migrated(fresh)
        let store = DatabaseStore(pool: fresh.pool(size: 4), logger: .store)
        for e in endpoints { try await store.webhookSave(e, secret: "whsec_" + Data(repeating: 7, count: 32).base64EncodedString(), replace: false) }
        try db.execute("INSERT INTO churnwatch.subscriptions (original_transaction_id, customer_ref) SELECT 'w' || i, 'ref-' || i FROM generate_series(1, 5) i")
        try db.execute("""
            INSERT INTO churnwatch.subscription_segments (original_transaction_id, segment, segment_since) SELECT 'w' || i, 'active', now() FROM generate_series(1, 5) i
            """)
        return (db, store)
    }

    static func event(_ db: PostgresConnection, _ otid: String, _ event: String, at: Double = 0) throws {
        try db.execute("""
            INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at)
            VALUES (\(otid), \(event), to_timestamp(1800000000 + \(at)), now())
            """)
    }

    static func bodies(_ db: PostgresConnection) throws -> [(seq: Int64?, type: String, body: [String: Any])] {
        try db.query("SELECT seq, type, body FROM churnwatch.webhook_messages ORDER BY id").map { row in
            let body = try JSONSerialization.jsonObject(with: Data(try row.decode(String.self, "body").utf8)) as? [String: Any] ?? [:]
            return (try row.decode(Int64?.self, "seq"), try row.decode(String.self, "type"), body)
        }
    }

    @Test("no endpoint, no message; with one, each fact writes its message at commit, with the segment after it; a rollback writes none")
    func writtenWithTheFacts() async throws {
        try await FreshDatabase.with { fresh in
            let (db, store) = try await Self.setUp(fresh, endpoints: [])
            try Self.event(db, "w1", "renewed")
            #expect(try Self.bodies(db).isEmpty)
            try await store.webhookSave(WebhookEndpoint(name: "crm", bundleId: Self.app, url: "https://example.com/h"), secret: "whsec_" + Data(repeating: 1, count: 32).base64EncodedString(), replace: false)
            try db.transaction { db in
                try Self.event(db, "w1", "auto_renew_disabled")
                try db.execute("UPDATE churnwatch.subscription_segments SET segment = 'will_not_renew' WHERE original_transaction_id = 'w1'")
            }
            #expect(throws: (any Error).self) {
                try db.transaction { db in
                    try Self.event(db, "w2", "auto_renew_disabled")
                    try db.execute("SELECT 1/0")
                }
            }
            let messages = try Self.bodies(db)
            #expect(messages.map(\.type) == ["churn_event.created", "segment.changed"], "\(messages.map(\.type))")
            let data = messages[0].body["data"] as? [String: Any] ?? [:]
            #expect(data["event"] as? String == "auto_renew_disabled" && data["segment"] as? String == "will_not_renew")
            #expect(data["customer_ref"] as? String == "ref-1" && data["original_transaction_id"] as? String == "w1")
            #expect(messages[0].body["type"] as? String == "churn_event.created" && messages[0].body["timestamp"] is String)
            let moved = messages[1].body["data"] as? [String: Any] ?? [:]
            #expect(moved["from"] as? String == "active" && moved["to"] as? String == "will_not_renew")
        }
    }

    @Test("numbering follows commit order, not insert order; deliveries fan out by app, type and enabled")
    func numberedInCommitOrder() async throws {
        try await FreshDatabase.with { fresh in
            let crm = WebhookEndpoint(name: "crm", bundleId: Self.app, url: "https://example.com/a")
            var events = WebhookEndpoint(name: "only-segments", bundleId: Self.app, url: "https://example.com/b", types: ["segment.changed"])
            events.maxInFlight = 2
            let other = WebhookEndpoint(name: "other-app", bundleId: "com.example.other", url: "https://example.com/c")
            let (db, store) = try await Self.setUp(fresh, endpoints: [crm, events, other])
            try await store.webhookEnable("other-app", enabled: false, reason: "test")
            // The first transaction writes first and commits last.
            let late = try fresh.connect()
            try late.execute("BEGIN")
            try Self.event(late, "w1", "renewed")
            try late.execute("SET CONSTRAINTS ALL IMMEDIATE")
            try Self.event(db, "w1", "expired", at: 1)
            #expect(try await store.webhookSequence() == 1)
            try late.execute("COMMIT")
            #expect(try await store.webhookSequence() == 1)
            let order = try db.query("SELECT seq, body FROM churnwatch.webhook_messages ORDER BY seq").map { try $0.decode(String.self, "body") }
            #expect(order.count == 2 && order[0].contains("\"expired\"") && order[1].contains("\"renewed\""), "\(order)")
            let deliveries = try db.query("SELECT endpoint, count(*) AS n FROM churnwatch.webhook_deliveries GROUP BY 1 ORDER BY 1")
                .map { "\(try $0.decode(String.self, "endpoint"))=\(try $0.decode(Int.self, "n"))" }
            #expect(deliveries == ["crm=2"])
        }
    }

    @Test("one line per subscription: only heads are leased, a leased head is nobody else's, the next waits for its settling")
    func linesAndLeases() async throws {
        try await FreshDatabase.with { fresh in
            let (db, store) = try await Self.setUp(fresh, endpoints: [WebhookEndpoint(name: "crm", bundleId: Self.app, url: "https://example.com/a")])
            for (i, e) in ["renewed", "auto_renew_disabled", "expired"].enumerated() { try Self.event(db, "w1", e, at: Double(i)) }
            try Self.event(db, "w2", "renewed")
            try await store.webhookSequence()
            let first = try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "a")
            #expect(first.count == 2 && Set(first.map { $0.body.contains("\"w1\"") }) == [true, false])
            #expect(try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "b").isEmpty)
            let w1 = first.first { $0.body.contains("\"w1\"") }!
            #expect(w1.body.contains("\"renewed\""))
            try await store.webhookSettle([WebhookSettlement(endpoint: "crm", messageId: w1.messageId, winbackId: nil, result: .delivered, status: 200, error: nil)])
            let next = try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "b")
            #expect(next.count == 1 && next[0].body.contains("auto_renew_disabled"), "\(next.map(\.body))")
            // A failure keeps the line waiting; the endpoint is failing until a 2xx brings it forward.
            try await store.webhookSettle([WebhookSettlement(endpoint: "crm", messageId: next[0].messageId, winbackId: nil,
                                                             result: .retry(wait: 3_600, pause: nil), status: 500, error: "HTTP 500")])
            #expect(try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "b").isEmpty)
            #expect(try await store.webhookEndpoints()[0].consecutiveFailures == 1)
            let other = first.first { !$0.body.contains("\"w1\"") }!
            try await store.webhookSettle([WebhookSettlement(endpoint: "crm", messageId: other.messageId, winbackId: nil, result: .delivered, status: 204, error: nil)])
            #expect(try await store.webhookEndpoints()[0].consecutiveFailures == 0)
            let again = try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "b")
            #expect(again.map(\.messageId) == [next[0].messageId] && again[0].attempts == 1)
            // Given back unattempted, a delivery is due at once for anyone, nothing counted.
            try await store.webhookRelease(sender: "b")
            #expect(try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "c").map(\.attempts) == [1])
        }
    }

    @Test("410 disables the endpoint; dead is kept; replay sends delivered and dead again, and a new endpoint its history")
    func goneDeadReplay() async throws {
        try await FreshDatabase.with { fresh in
            let (db, store) = try await Self.setUp(fresh, endpoints: [WebhookEndpoint(name: "crm", bundleId: Self.app, url: "https://example.com/a")])
            try Self.event(db, "w1", "renewed")
            try Self.event(db, "w2", "renewed")
            try await store.webhookSequence()
            let claimed = try await store.webhookClaim(endpoint: "crm", limit: 10, lease: 60, sender: "a")
            try await store.webhookSettle([
                WebhookSettlement(endpoint: "crm", messageId: claimed[0].messageId, winbackId: nil, result: .dead, status: 500, error: "HTTP 500"),
                WebhookSettlement(endpoint: "crm", messageId: claimed[1].messageId, winbackId: nil, result: .gone, status: 410, error: "HTTP 410"),
            ])
            let e = try await store.webhookEndpoints()[0]
            #expect(!e.enabled && e.disabledReason?.contains("410") == true)
            let stats = try await store.webhookStats()[0]
            #expect(stats.dead == 1 && stats.pending == 1 && stats.lastError != nil)
            try await store.webhookSave(WebhookEndpoint(name: "late", bundleId: Self.app, url: "https://example.com/b"), secret: "whsec_" + Data(repeating: 2, count: 32).base64EncodedString(), replace: false)
            #expect(try await store.webhookReplay("late", since: Date(timeIntervalSinceNow: -3_600)) == 2)
            #expect(try await store.webhookReplay("crm", since: Date(timeIntervalSinceNow: -3_600)) == 1)  // the dead one; the pending one waits already
            #expect(try await store.webhookStats().first { $0.endpoint.name == "crm" }?.dead == 0)
            await #expect(throws: WebhookError.self) { try await store.webhookReplay("nobody", since: Date()) }
        }
    }

    @Test("a campaign's consumer: ready entries claimed with their message, held-out never, done on delivery, pending again when dead; one consumer per campaign")
    func winbackConsumer() async throws {
        try await FreshDatabase.with { fresh in
            let consumer = WebhookEndpoint(name: "braze", bundleId: Self.app, url: "https://example.com/a", campaigns: ["save_offer"])
            let (db, store) = try await Self.setUp(fresh, endpoints: [consumer])
            await #expect(throws: WebhookError.self) {
                try await store.webhookSave(WebhookEndpoint(name: "second", bundleId: Self.app, url: "https://example.com/b", campaigns: ["save_offer"]),
                                            secret: "whsec_" + Data(repeating: 3, count: 32).base64EncodedString(), replace: false)
            }
            #expect(try await store.webhookConsumer(campaign: "save_offer", apps: []) == "braze")
            let ready = try WinbackQueueTests.entry(db, "w1", notBefore: Date(timeIntervalSinceNow: -60))
            let held = try WinbackQueueTests.entry(db, "w2", notBefore: Date(timeIntervalSinceNow: -60), status: "held_out")
            let later = try WinbackQueueTests.entry(db, "w3", notBefore: Date(timeIntervalSinceNow: 3_600))
            #expect(try await store.webhookWinbackReady(now: Date()) { "{\"type\":\"winback.ready\",\"data\":{\"id\":\($0.id)}}" } == 1)
            #expect(try WinbackQueueTests.status(db, ready).claimedBy == "webhook:braze")
            #expect(try WinbackQueueTests.status(db, held).status == "held_out" && WinbackQueueTests.status(db, later).status == "pending")
            try await store.webhookSequence()
            let d = try await store.webhookClaim(endpoint: "braze", limit: 10, lease: 60, sender: "a")
            #expect(d.count == 1 && d[0].winbackId == ready && d[0].type == "winback.ready")
            try await store.webhookSettle([WebhookSettlement(endpoint: "braze", messageId: d[0].messageId, winbackId: ready, result: .dead, status: nil, error: "refused")])
            #expect(try WinbackQueueTests.status(db, ready).status == "pending")
            #expect(try await store.webhookWinbackReady(now: Date()) { _ in "{}" } == 1)
            try await store.webhookSequence()
            let e = try await store.webhookClaim(endpoint: "braze", limit: 10, lease: 60, sender: "a")
            try await store.webhookSettle([WebhookSettlement(endpoint: "braze", messageId: e[0].messageId, winbackId: ready, result: .delivered, status: 200, error: nil)])
            #expect(try WinbackQueueTests.status(db, ready).status == "done")
        }
    }
}
