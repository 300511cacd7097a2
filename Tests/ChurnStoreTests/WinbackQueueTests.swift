@testable import ChurnStore
import Foundation
import Postgres
import Testing

@Suite("ChurnStore win-back queue: claim, ack, release")
struct WinbackQueueTests {
    static let t0 = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC
    static let minute: TimeInterval = 60
    static let hour: TimeInterval = 3600

    /// Inserts one entry; returns its id.
    @discardableResult
    static func entry(_ db: PostgresConnection, _ otid: String, campaign: String = "save_offer", episode: String = "e1",
                      notBefore: Date = t0.addingTimeInterval(-3600), expiresAt: Date? = nil, status: String = "pending",
                      claimedBy: String? = nil, claimExpiresAt: Date? = nil, offers: [String] = []) throws -> Int64 {
        try db.query("""
            INSERT INTO churnwatch.winback_queue (original_transaction_id, app_account_token, customer_ref, campaign, episode,
                product_id, reason, offer_ids, not_before, expires_at, status, claimed_by, claimed_at, claim_expires_at)
            VALUES (\(otid), \(UUID()), \("ref-" + otid), \(campaign), \(episode), 'pro.monthly', 'will_not_renew', \(offers),
                \(notBefore), \(expiresAt), \(status), \(claimedBy), \(claimedBy == nil ? nil : notBefore), \(claimExpiresAt))
            RETURNING id
            """)[0].decode(Int64.self, "id")
    }

    static func status(_ db: PostgresConnection, _ id: Int64) throws -> (status: String, claimedBy: String?, claimExpiresAt: Date?) {
        let row = try db.query("SELECT status, claimed_by, claim_expires_at FROM churnwatch.winback_queue WHERE id = \(id)")[0]
        return (try row.decode(String.self, "status"), try row.decode(String?.self, "claimed_by"), try row.decode(Date?.self, "claim_expires_at"))
    }

    static func migrated(_ fresh: FreshDatabase) throws -> PostgresConnection {
        let db = try fresh.connect()
        try Migrator(migrations: try ProjectMigrations.load(), logger: .migrate, defaultBundleId: "com.example.churnwatch").migrate(db)
        return db
    }

    @Test("claim takes due entries of one campaign, oldest first, up to the limit, and records the claim")
    func claimOrderAndFields() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let newer = try Self.entry(db, "1001", notBefore: Self.t0.addingTimeInterval(-1 * Self.hour), offers: ["wb.best", "wb.second"])
            let oldest = try Self.entry(db, "1002", notBefore: Self.t0.addingTimeInterval(-3 * Self.hour))
            let middle = try Self.entry(db, "1003", notBefore: Self.t0.addingTimeInterval(-2 * Self.hour), expiresAt: Self.t0.addingTimeInterval(Self.hour))
            let future = try Self.entry(db, "1004", notBefore: Self.t0.addingTimeInterval(Self.minute))
            let otherCampaign = try Self.entry(db, "1005", campaign: "billing_fix")
            try Self.entry(db, "1006", status: "done")
            try Self.entry(db, "1007", status: "obsolete")

            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let first = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "mailer-1", limit: 2, lease: 15 * Self.minute, asOf: Self.t0)
            #expect(first.entries.map(\.id) == [oldest, middle])
            #expect(first.expired == 0)
            let e = try #require(first.entries.first)
            #expect(e.status == .claimed && e.claimedBy == "mailer-1")
            #expect(e.claimedAt == Self.t0)
            #expect(e.claimExpiresAt == Self.t0.addingTimeInterval(15 * Self.minute))
            #expect(e.customerRef == "ref-1002" && e.productId == "pro.monthly" && e.episode == "e1")

            let second = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "mailer-1", limit: 10, lease: 15 * Self.minute, asOf: Self.t0)
            #expect(second.entries.map(\.id) == [newer], "not_before in the future, other campaigns and settled entries are not claimed")
            #expect(second.entries.first?.offerIds == ["wb.best", "wb.second"])
            #expect(try Self.status(db, future).status == "pending")
            #expect(try Self.status(db, otherCampaign).status == "pending")

            // not_before is inclusive: at its moment the entry is due.
            let atNotBefore = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "mailer-1", limit: 10, lease: 60,
                                                           asOf: Self.t0.addingTimeInterval(Self.minute))
            #expect(atNotBefore.entries.map(\.id) == [future])
        }
    }

    @Test("concurrent consumers on separate connections never get the same entry, and together get all of them")
    func concurrentClaims() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            try db.execute("""
                INSERT INTO churnwatch.winback_queue (original_transaction_id, campaign, episode, reason, not_before)
                SELECT 'c' || g, 'winback_offer', 'e', 'churned_voluntary', \(Self.t0) - make_interval(secs => g)
                FROM generate_series(1, 300) AS g
                """)
            let consumers = 6
            let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for c in 0..<consumers {
                    let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let batch = try await store.database.winbackClaim(campaign: .winbackOffer, consumer: "consumer-\(c)", limit: 7,
                                                                     lease: 900, asOf: Self.t0)
                            if batch.entries.isEmpty { return mine }
                            #expect(batch.entries.allSatisfy { $0.claimedBy == "consumer-\(c)" })
                            mine += batch.entries.map(\.id)
                        }
                    }
                }
                var all: [[Int64]] = []
                for try await ids in group { all.append(ids) }
                return all
            }
            let flat = claimed.flatMap { $0 }
            #expect(flat.count == 300)
            #expect(Set(flat).count == 300, "an entry was claimed twice")
            let stillPending = try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE status <> 'claimed'")[0].decode(Int.self, at: 0)
            #expect(stillPending == 0)
        }
    }

    @Test("a claim skips entries another transaction has locked instead of waiting for them")
    func skipsLockedEntries() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let ids = try (1...5).map { try Self.entry(db, "s\($0)", notBefore: Self.t0.addingTimeInterval(Double(-10 + $0))) }
            // Another consumer in the middle of its claim holds the two oldest.
            let other = try fresh.connect()
            try other.execute("BEGIN")
            _ = try other.query("SELECT id FROM churnwatch.winback_queue WHERE id = ANY(\(Array(ids.prefix(2)))) FOR UPDATE")
            // Were the claim to wait on those locks, lock_timeout would fail it instead of hanging the test.
            let pool = PostgresPool(connectionString: fresh.url, overrides: ["dbname": fresh.name, "options": "-c lock_timeout=5s"], size: 1, logger: .postgres)
            let claim = try await DatabaseStore(pool: pool, logger: .store).winbackClaim(campaign: .saveOffer, consumer: "b", limit: 10, lease: 900, asOf: Self.t0)
            #expect(claim.entries.map(\.id) == Array(ids.dropFirst(2)))
            try other.execute("ROLLBACK")
            #expect(try Self.status(db, ids[0]).status == "pending")
        }
    }

    @Test("an entry whose claim lease ran out is claimable again; the first consumer's ack is then refused")
    func leaseExpiry() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let id = try Self.entry(db, "2001")
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let a = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "a", limit: 10, lease: 15 * Self.minute, asOf: Self.t0)
            #expect(a.entries.map(\.id) == [id])

            let duringLease = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "b", limit: 10, lease: 15 * Self.minute,
                                                           asOf: Self.t0.addingTimeInterval(14 * Self.minute))
            #expect(duringLease.entries.isEmpty)

            let afterLease = Self.t0.addingTimeInterval(16 * Self.minute)
            let b = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "b", limit: 10, lease: 15 * Self.minute, asOf: afterLease)
            #expect(b.entries.map(\.id) == [id])
            #expect(b.entries.first?.claimedBy == "b")
            #expect(b.entries.first?.claimExpiresAt == afterLease.addingTimeInterval(15 * Self.minute))

            let lateAck = try await store.database.winbackAck(ids: [id], consumer: "a")
            #expect(lateAck.settled.isEmpty)
            #expect(lateAck.refused == [.init(id: id, why: .claimedByOther("b"))])
            let ack = try await store.database.winbackAck(ids: [id], consumer: "b")
            #expect(ack.settled == [id] && ack.refused.isEmpty)
            #expect(try Self.status(db, id).status == "done")
            #expect(try Self.status(db, id).claimedBy == "b", "done entries keep who sent them")
        }
    }

    @Test("entries past expires_at become expired before claiming; a live claim past it is left to its consumer")
    func expiry() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let at = Self.t0
            let pendingPast = try Self.entry(db, "3001", expiresAt: at.addingTimeInterval(-Self.minute))
            let pendingAtBoundary = try Self.entry(db, "3002", expiresAt: at)
            let lapsedClaimPast = try Self.entry(db, "3003", expiresAt: at.addingTimeInterval(-Self.minute), status: "claimed",
                                                 claimedBy: "crashed", claimExpiresAt: at.addingTimeInterval(-2 * Self.minute))
            let liveClaimPast = try Self.entry(db, "3004", expiresAt: at.addingTimeInterval(-Self.minute), status: "claimed",
                                               claimedBy: "busy", claimExpiresAt: at.addingTimeInterval(5 * Self.minute))
            let stillOpen = try Self.entry(db, "3005", expiresAt: at.addingTimeInterval(Self.minute))
            let otherCampaignPast = try Self.entry(db, "3006", campaign: "billing_fix", expiresAt: at.addingTimeInterval(-Self.minute))

            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let claim = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "c", limit: 10, lease: 900, asOf: at)
            #expect(claim.entries.map(\.id) == [stillOpen])
            #expect(claim.expired == 3)
            #expect(try Self.status(db, pendingPast).status == "expired")
            #expect(try Self.status(db, pendingAtBoundary).status == "expired")
            #expect(try Self.status(db, lapsedClaimPast).status == "expired")
            #expect(try Self.status(db, liveClaimPast).status == "claimed")
            #expect(try Self.status(db, otherCampaignPast).status == "pending", "only the claimed campaign is swept")

            // The busy consumer may still ack what it holds.
            #expect(try await store.database.winbackAck(ids: [liveClaimPast], consumer: "busy").settled == [liveClaimPast])
        }
    }

    @Test("ack and release settle only claimed entries, name the others, and a retried ack is not an error")
    func ackAndRelease() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let one = try Self.entry(db, "4001")
            let two = try Self.entry(db, "4002")
            let three = try Self.entry(db, "4003")
            let pending = try Self.entry(db, "4004", notBefore: Self.t0.addingTimeInterval(Self.hour))
            let obsolete = try Self.entry(db, "4005", status: "obsolete")
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let claim = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "m", limit: 10, lease: 900, asOf: Self.t0)
            #expect(claim.entries.map(\.id).sorted() == [one, two, three])

            let ack = try await store.database.winbackAck(ids: [one, 999_999, pending, obsolete, one], consumer: nil)
            #expect(ack.settled == [one])
            #expect(ack.alreadyDone.isEmpty)
            #expect(ack.refused == [
                .init(id: pending, why: .notClaimed(.pending)),
                .init(id: obsolete, why: .notClaimed(.obsolete)),
                .init(id: 999_999, why: .unknown),
            ])

            let retried = try await store.database.winbackAck(ids: [one], consumer: "m")
            #expect(retried.settled.isEmpty && retried.alreadyDone == [one] && retried.refused.isEmpty)
            let byOther = try await store.database.winbackAck(ids: [one], consumer: "someone-else")
            #expect(byOther.refused == [.init(id: one, why: .notClaimed(.done))])

            let refusedRelease = try await store.database.winbackRelease(ids: [two], consumer: "someone-else")
            #expect(refusedRelease.refused == [.init(id: two, why: .claimedByOther("m"))])
            #expect(try Self.status(db, two).status == "claimed")

            let release = try await store.database.winbackRelease(ids: [two, one], consumer: "m")
            #expect(release.settled == [two])
            #expect(release.refused == [.init(id: one, why: .notClaimed(.done))], "a done entry is never given back")
            let released = try Self.status(db, two)
            #expect(released.status == "pending" && released.claimedBy == nil && released.claimExpiresAt == nil)

            // Released entries are claimable at once, by anyone.
            let again = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "n", limit: 10, lease: 900, asOf: Self.t0)
            #expect(again.entries.map(\.id) == [two])
        }
    }

    @Test("list filters by campaign and status")
    func list() async throws {
        try await FreshDatabase.with { fresh in
            let db = try Self.migrated(fresh)
            let a = try Self.entry(db, "5001")
            try Self.entry(db, "5002", status: "done")
            try Self.entry(db, "5003", campaign: "billing_fix")
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            #expect(try await store.database.winbackList(campaign: .saveOffer, status: .pending, limit: 10).map(\.id) == [a])
            #expect(try await store.database.winbackList(campaign: nil, status: nil, limit: 10).count == 3)
            #expect(try await store.database.winbackList(campaign: nil, status: nil, limit: 2).count == 2)
        }
    }
}
