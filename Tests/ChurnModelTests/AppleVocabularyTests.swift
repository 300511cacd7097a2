import AppStoreModels
import Foundation
import Testing
@testable import ChurnModel

/// ChurnModel reads Apple's values through AppStoreModels' enums and milliseconds: one
/// vocabulary, with the names ChurnModel writes into event details unchanged.
@Suite("Apple's vocabulary in the churn model")
struct AppleVocabularyTests {
    @Test("expiration intents keep their event-detail names")
    func expirationIntentNames() {
        #expect(ExpirationIntent.allCases.map(\.name) == [
            "customer_cancelled", "billing_error", "price_increase_not_consented", "product_not_for_sale", "other",
        ])
    }

    @Test("each Apple status maps to a state and back", arguments: SubscriptionStatus.allCases)
    func statusRoundTrip(_ status: SubscriptionStatus) {
        #expect(SubscriptionState(status).appleStatus == status)
    }

    @Test("a raw value outside Int32 is unknown, not a crash")
    func outsideInt32IsUnknown() {
        let raw = Int(Int32.max) + 1
        let s = Apple().expired(intent: raw).snapshot(at: day(31))
        #expect(s.expirationIntent == nil)
        #expect(s.unknownValues == [UnknownValue(field: "expirationIntent", raw: String(raw))])
    }

    /// Dates a truncating conversion moved one millisecond earlier (their `Date` multiplies back
    /// to a hair below the integer), and ordinary ones.
    static let milliseconds: [Int64] = [1_096_484_645_751, 2_159_836_788_069, 211_459_841_331, 1_698_148_950_123, 0]

    @Test("Apple's milliseconds survive facts' JSON exactly", arguments: milliseconds)
    func millisecondsRoundTrip(_ ms: Int64) throws {
        let date = EpochMilliseconds(ms).date
        let facts = TransactionFacts(originalTransactionId: "1", transactionId: "2", productId: "p", purchaseDate: date)
        let object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(facts)) as? [String: Any]
        #expect((object?["purchaseDate"] as? NSNumber)?.int64Value == ms)
        #expect(try JSONDecoder().decode(TransactionFacts.self, from: JSONEncoder().encode(facts)).purchaseDate == date)
    }
}
