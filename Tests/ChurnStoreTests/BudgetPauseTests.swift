@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// A 429's pause in the shared budget never outlives `APPSTORE_MAX_RETRY_WAIT`: not when it is
/// stored, and not when an older version (or a process with a longer cap) stored one.
@Suite("ChurnStore api_budget pauses are capped")
struct BudgetPauseTests {
    @Test func aFarFuturePauseIsCappedWhenStoredAndDroppedWhenFound() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let store = ChurnStore(pool: fresh.pool(), logger: .store)
            let key = "app/subscriptions/Production"
            let first = try await store.apiBudgetTake(key: key, rate: 10, burst: 5, want: 1, maxPause: 60)
            #expect(first.granted == 1)

            // Stored: Retry-After in 2100, capped at 60 s from the moment it is stored. What is
            // left of it when read back is bounded by the time measured around both steps (no
            // fixed margin: a loaded machine only widens the measured interval).
            let y2100 = Date(timeIntervalSince1970: 4_102_444_800)
            let before = ContinuousClock.now
            try await store.apiBudgetPause(key: key, until: y2100, maxPause: 60)
            let stored = try db.query("SELECT extract(epoch FROM paused_until - clock_timestamp())::float8 FROM churnwatch.api_budget WHERE key = \(key)")[0]
                .decode(Double.self, at: 0)
            let paused = try await store.apiBudgetTake(key: key, rate: 10, burst: 5, want: 1, maxPause: 60)
            let elapsed = Self.seconds(ContinuousClock.now - before)
            #expect(stored >= 60 - elapsed && stored <= 60, "paused for \(stored) s, \(elapsed) s after storing")
            #expect(paused.granted == 0 && paused.retryAfter >= 60 - elapsed && paused.retryAfter <= 60, "\(paused) \(elapsed) s after storing")
            #expect(paused.droppedPause == nil)

            // Found: a pause in 2100 stored by an older version is dropped, and said so.
            try db.execute("UPDATE churnwatch.api_budget SET paused_until = \(y2100), tokens = 5 WHERE key = \(key)")
            let healed = try await store.apiBudgetTake(key: key, rate: 10, burst: 5, want: 1, maxPause: 60)
            #expect(healed.granted == 1, "\(healed)")
            #expect(healed.droppedPause.map { abs($0.timeIntervalSince(y2100)) < 1 } == true, "\(healed)")
            #expect(try db.query("SELECT paused_until FROM churnwatch.api_budget WHERE key = \(key)")[0].decode(Date?.self, at: 0) == nil)
            let again = try await store.apiBudgetTake(key: key, rate: 10, burst: 5, want: 1, maxPause: 60)
            #expect(again.granted == 1 && again.droppedPause == nil, "\(again)")
        }
    }

    @Test("a 429 cuts the shared rate: by 15 % when few calls were granted since the last cut, else to the share the server took; not for a call sent before the last cut, nor within the hold; the rate climbs back, quickly to 95 % of the rate refused, then 1 % a second")
    func aRefusalCutsTheSharedRate() async throws {
        try await FreshDatabase.with { fresh in
            let db = try fresh.connect()
            try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
            let store = ChurnStore(pool: fresh.pool(), logger: .store)
            let key = "app/status/Production"
            func allowed() throws -> Double? {
                try db.query("SELECT allowed_rate FROM churnwatch.api_budget WHERE key = \(key)")[0].decode(Double?.self, at: 0)
            }
            func age(_ seconds: Int, granted: Int = 0, refused: Int = 0) throws {
                try db.execute("""
                    UPDATE churnwatch.api_budget SET allowed_at = clock_timestamp() - make_interval(secs => \(seconds)),
                        window_granted = \(granted), window_refused = \(refused) WHERE key = \(key)
                    """)
            }
            _ = try await store.apiBudgetTake(key: key, rate: 50, burst: 25, want: 1)
            let first = try #require(try await store.apiBudgetPause(key: key, until: Date(), sentAt: Date()))
            #expect(abs(first - 42.5) < 0.001, "one call granted: × 0.85, \(first)")
            // A call sent before that cut: counted in no window, no cut.
            try age(1)
            let cutAt = try db.query("SELECT allowed_at FROM churnwatch.api_budget WHERE key = \(key)")[0].decode(Date.self, at: 0)
            try await store.apiBudgetPause(key: key, until: Date(), sentAt: cutAt.addingTimeInterval(-1))
            #expect(try allowed() == first)
            // 100 calls granted since the cut, 79 refused, this one the 80th: the server took a fifth.
            try age(1, granted: 100, refused: 79)
            let deep = try #require(try await store.apiBudgetPause(key: key, until: Date(), sentAt: Date().addingTimeInterval(-0.001)))
            // A fifth of the rate a second after the first cut: climbed back towards 95 % of 50 by then.
            #expect(deep > first * 0.19 && deep < 50 * 0.21, "\(deep)")
            // Long after the cut, with nothing refused since, the rate has climbed back (1 %/s of itself, at most the configured).
            try age(1000)
            // An empty bucket: the wait for one token is 1 / rate. (On a busy machine a token may
            // refill between the two statements, 20 ms at 50/s: then empty it again.)
            func takeFromEmpty() async throws -> BudgetGrant {
                try db.execute("UPDATE churnwatch.api_budget SET tokens = 0, updated_at = clock_timestamp(), paused_until = NULL WHERE key = \(key)")
                return try await store.apiBudgetTake(key: key, rate: 50, burst: 25, want: 1)
            }
            var empty = try await takeFromEmpty()
            for _ in 0..<20 where empty.granted != 0 { empty = try await takeFromEmpty() }
            #expect(empty.granted == 0 && 1 / empty.retryAfter > 45, "\(empty)")
        }
    }

    private static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}
