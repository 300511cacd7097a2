import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// Each recorded cancel-page request is one `cancel_page_viewed` event (issue 48): two of one
/// subscriber signed in the same millisecond are two views; the same request recorded again
/// (Apple's retry, a second serve process) is still one.
@Suite("cancel-page views in the event log")
struct CancelPageEventsTests {
    static func view(_ id: UUID, at: Date) -> RetentionRequestRecord {
        RetentionRequestRecord(requestIdentifier: id, originalTransactionId: "cp-1", productId: "monthly", userLocale: "en-US",
                               environment: "Production", signedAt: at, arm: .noRule, ruleName: nil, ruleKind: nil, answerKind: nil,
                               messageId: nil, segment: .active, tenureDays: 30, periodEndsAt: nil, factsKnown: true, answer: nil)
    }

    @Test("two requests in the same millisecond log two views; each recorded again logs nothing more")
    func sameMillisecondTwoViews() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let at = Date(timeIntervalSince1970: 1_795_255_200.123)
            let (a, b) = (UUID(), UUID())
            #expect(try await store.retentionRecord([Self.view(a, at: at), Self.view(b, at: at)]) == 2)
            #expect(try await store.retentionRecord([Self.view(a, at: at), Self.view(b, at: at)]) == 0)
            let events = try db.query("""
                SELECT details->>'request_identifier' FROM churnwatch.churn_events WHERE event = 'cancel_page_viewed' ORDER BY 1
                """).map { try $0.decode(String.self, at: 0) }
            #expect(events == [a, b].map { $0.uuidString.lowercased() }.sorted(), "\(events)")
        }
    }
}

/// `subscription_segments.last_cancel_page_view_at` (issue 48, decision Y): set from each
/// recorded view, the latest kept; read by the cancel page's lookup; rules keep `viewed_before`.
@Suite("the last cancel-page view")
struct LastCancelPageViewTests {
    @Test("a recorded view sets the subscriber's last view (the latest of several, never moved back); the lookup reads it; a rule's viewed_before round-trips")
    func lastViewKept() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            try db.execute("""
                INSERT INTO churnwatch.subscription_segments (original_transaction_id, segment, segment_since, auto_renew, bundle_id)
                VALUES ('cp-1', 'active', now(), true, 'com.example.churnwatch'), ('cp-2', 'will_not_renew', now(), false, 'com.example.churnwatch')
                """)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let t = Date(timeIntervalSince1970: 1_795_255_200)
            #expect(try await store.retentionLookup(originalTransactionId: "cp-1", requestIdentifier: UUID()).lastCancelPageViewAt == nil)
            try await store.retentionRecord([CancelPageEventsTests.view(UUID(), at: t), CancelPageEventsTests.view(UUID(), at: t + 60)])
            #expect(try await store.retentionLookup(originalTransactionId: "cp-1", requestIdentifier: UUID()).lastCancelPageViewAt == t + 60)
            try await store.retentionRecord([CancelPageEventsTests.view(UUID(), at: t + 30)])
            #expect(try await store.retentionLookup(originalTransactionId: "cp-1", requestIdentifier: UUID()).lastCancelPageViewAt == t + 60)
            // Per segment: viewed within 30 days of the day asked, and still renewing.
            let views = Dictionary(uniqueKeysWithValues: try await store.segmentCancelPageViews(asOf: t + 86_400, days: 30).map { ($0.segment, $0) })
            #expect(views.count == Segment.allCases.count)
            #expect(views["active"].map { ($0.subscriptions, $0.viewed, $0.viewedStillRenewing) } ?? (0, 0, 0) == (1, 1, 1))
            #expect(views["will_not_renew"].map { ($0.subscriptions, $0.viewed) } ?? (0, 0) == (1, 0))
            #expect(try await store.segmentCancelPageViews(asOf: t + 31 * 86_400 + 61, days: 30).allSatisfy { $0.viewed == 0 })
            let rule = RetentionRule(name: "second", viewedBefore: .within(days: 14), kind: .message, messageId: ViewedBeforeFixture.m)
            try await store.retentionRuleSet(rule)
            #expect(try await store.retentionRules().rules == [rule])
        }
    }
}

enum ViewedBeforeFixture {
    static let m = "11111111-1111-4111-8111-111111111111"
}
