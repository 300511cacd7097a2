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
