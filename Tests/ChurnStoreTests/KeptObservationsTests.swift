import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// A kept observation without a snapshot has its successor's state at its own moment (issue 47:
/// more than half of the kept observations repeat their successor's state).
@Suite("the kept observation sequence")
struct KeptObservationsTests {
    static let t0 = Date(timeIntervalSince1970: 1_795_255_200)
    static let day: TimeInterval = 86_400

    static func snapshot(autoRenew: Int, at: Date) -> SubscriptionSnapshot {
        var transaction = TransactionFacts(originalTransactionId: "k-1", transactionId: "k-1-1", productId: "pro",
                                           purchaseDate: t0.addingTimeInterval(-10 * day), expiresDate: t0.addingTimeInterval(20 * day))
        var renewal = RenewalFacts(originalTransactionId: "k-1", autoRenewProductId: "pro", productId: "pro", autoRenewStatus: autoRenew)
        transaction.signedDate = at
        renewal.signedDate = at
        return SubscriptionSnapshot(status: 1, transaction: transaction, renewal: renewal, asOf: at)
    }

    @Test("rows without a snapshot resolve through their successors to the current state, each at its own moment; one whose successor is gone is left out")
    func repeatsResolveToTheirSuccessor() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let at = { (d: Double) in Self.t0.addingTimeInterval(d * Self.day) }
            let json = { (s: SubscriptionSnapshot) in PostgresJSON(data: try JSONEncoder().encode(s)) }
            // Day 1: auto-renew off (its own snapshot); days 2 and 3 repeat day 4's state (the
            // current one, auto-renew on); day 0.5 points to a moment no longer kept.
            let rows: [(Double, Double, SubscriptionSnapshot?)] = [(1, 2, Self.snapshot(autoRenew: 0, at: at(1))), (2, 3, nil), (3, 4, nil),
                                                                   (0.5, 0.7, nil)]
            for (signed, next, snapshot) in rows {
                try db.execute("""
                    INSERT INTO churnwatch.observations (original_transaction_id, signed_date, as_of, next_signed_date, snapshot, bundle_id)
                    VALUES ('k-1', \(at(signed)), \(at(signed)), \(at(next)), \(try snapshot.map(json))::jsonb, 'com.example.churnwatch')
                    """)
            }
            let current = Observation(snapshot: Self.snapshot(autoRenew: 1, at: at(4)), asOf: at(4))
            let kept = try ChurnStore.keptObservations(db, "k-1", current: current, JSONDecoder())
            #expect(kept.map(\.signedDate) == [at(3), at(2), at(1)])
            #expect(kept.map(\.snapshot.autoRenew) == [true, true, false])
            var repeated = current.snapshot
            repeated.signedDate = at(2)
            #expect(kept[1].snapshot == repeated, "day 2 is the current state at day 2's moment")
        }
    }
}
