import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// With the change feed, the stale safety net is levelled: each subscription on its own night of
/// the cycle, so a night that polled everyone is not followed by a wave a cycle later.
@Suite("ChurnStore stale safety net with the feed")
struct StaleSlotsTests {
    static let night0 = PlanTests.asOf
    static let day: TimeInterval = 86_400

    @Test("nightly runs take every slot exactly once a cycle: each night's range starts where the last one ended", arguments: [30.0, 120.0, 45.5])
    func nightsPartitionTheCycle(days: Double) throws {
        let cycle = days * Self.day
        let nights = Int(days.rounded(.up))
        var covered = 0
        var previous: StaleSlots?
        for k in 0..<nights {
            let slots = try #require(StaleSlots.due(asOf: Self.night0.addingTimeInterval(Double(k) * Self.day), cycle: cycle))
            if let previous { #expect(slots.lower == previous.upper, "night \(k)") }
            covered += (slots.upper - slots.lower + StaleSlots.count) % StaleSlots.count
            previous = slots
        }
        // Whole nights: the cycle's last, partial night overlaps the next cycle's first.
        #expect(covered >= StaleSlots.count && covered < StaleSlots.count + Int(Double(StaleSlots.count) / days) + 1, "\(covered)")
        #expect(StaleSlots.due(asOf: Self.night0, cycle: Self.day) == nil)
        #expect(StaleSlots(lower: 65_000, upper: 300).contains(65_535) && StaleSlots(lower: 65_000, upper: 300).contains(0))
        #expect(!StaleSlots(lower: 65_000, upper: 300).contains(300) && !StaleSlots(lower: 100, upper: 300).contains(99))
    }

    /// The stale ids the plan picks at `asOf`, by the feed's rules in both environments.
    static func staleIDs(_ db: PostgresConnection, asOf: Date, windows: PlanWindows) throws -> [String] {
        let selection = ChurnStore.dueSelection(app: "com.example.churnwatch", asOf: asOf, windows: windows)
        return try db.query("SELECT original_transaction_id FROM (\(selection)) AS d WHERE reason = 'stale'")
            .map { try $0.decode(String.self, at: 0) }
    }

    @Test("3,000 subscriptions polled on one night: a 30-day cycle polls each exactly once, about 100 a night, none recently polled, and one overdue at once")
    func levelledAfterAFullNight() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let polled = Self.night0.addingTimeInterval(-7.5 * Self.day), far = Self.night0.addingTimeInterval(400 * Self.day)
            _ = try db.execute("""
                INSERT INTO churnwatch.subscriptions (original_transaction_id, state, expires_at, period_start, signed_date,
                    last_success_at, last_polled_at, last_outcome, auto_renew, product_id, auto_renew_product_id)
                SELECT (300000000000000 + g)::text, 'active', \(far), \(polled), \(polled), \(polled), \(polled), 'ok', true, 'p', 'p'
                FROM generate_series(1, 3000) AS g
                """)
            var w = PlanWindows()
            w.feedEnvironments = [.production, .sandbox]
            w.feedStaleAfter = 30 * Self.day
            var seen: [String: Int] = [:]
            var perNight: [Int] = []
            for k in 0..<30 {
                let ids = try Self.staleIDs(db, asOf: Self.night0.addingTimeInterval(Double(k) * Self.day), windows: w)
                perNight.append(ids.count)
                for id in ids { seen[id, default: 0] += 1 }
            }
            #expect(seen.count == 3000 && seen.values.allSatisfy { $0 == 1 }, "\(seen.count) ids, most \(seen.values.max() ?? 0) times")
            #expect(perNight.max()! <= 200 && perNight.min()! >= 40, "\(perNight)")

            // Polled three days ago: its night passes it by; overdue (38 days): due on any night.
            _ = try db.execute("UPDATE churnwatch.subscriptions SET last_success_at = \(Self.night0.addingTimeInterval(-3 * Self.day))")
            for k in 0..<30 {
                #expect(try Self.staleIDs(db, asOf: Self.night0.addingTimeInterval(Double(k) * Self.day), windows: w).count
                        == (k <= 4 ? 0 : perNight[k]), "night \(k)")
            }
            _ = try db.execute("UPDATE churnwatch.subscriptions SET last_success_at = \(Self.night0.addingTimeInterval(-38 * Self.day))")
            #expect(try Self.staleIDs(db, asOf: Self.night0, windows: w).count == 3000)
            // Without the feed, the plain age: nobody polled 7.5 days ago is stale.
            _ = try db.execute("UPDATE churnwatch.subscriptions SET last_success_at = \(polled)")
            #expect(try Self.staleIDs(db, asOf: Self.night0, windows: PlanWindows()).isEmpty)
        }
    }
}
