import ChurnModel
@testable import ChurnStore
import Foundation
import Postgres
import Testing

/// Offers, holdout draws and outcomes as the poll-results commit writes them.
@Suite("ChurnStore retention loop: offers, holdout, outcomes, renewal price")
struct RetentionLoopStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_795_255_200) // 2026-11-21 02:00 UTC
    static let day: TimeInterval = 86_400

    /// A monthly subscription bought at t0 - 10 days, auto-renew as given, priced 9.99 USD.
    /// With `winBack`: expired by the customer, Apple listing those win-back offers.
    static func snapshot(_ otid: String, autoRenew: Bool, at: Date, winBack: [String]? = nil) -> SubscriptionSnapshot {
        let tx = TransactionFacts(originalTransactionId: otid, transactionId: "t-\(otid)", webOrderLineItemId: "w-\(otid)",
                                  productId: "pro.monthly", purchaseDate: t0 - 10 * day, originalPurchaseDate: t0 - 10 * day,
                                  expiresDate: t0 + 20 * day, price: 9_990, currency: "USD")
        let renewal = RenewalFacts(originalTransactionId: otid, autoRenewProductId: "pro.monthly", productId: "pro.monthly",
                                   autoRenewStatus: autoRenew ? 1 : 0, expirationIntent: winBack == nil ? nil : 1,
                                   renewalDate: t0 + 20 * day, renewalPrice: 9_990, currency: "USD", eligibleWinBackOfferIds: winBack,
                                   signedDate: at)
        return SubscriptionSnapshot(status: winBack == nil ? 1 : 2, transaction: tx, renewal: renewal, asOf: at)
    }

    /// `otid` renewed at the end of its period (t0 + 20 days), for another month.
    static func renewed(_ otid: String, at: Date) -> SubscriptionSnapshot {
        let tx = TransactionFacts(originalTransactionId: otid, transactionId: "t2-\(otid)", webOrderLineItemId: "w2-\(otid)",
                                  productId: "pro.monthly", purchaseDate: t0 + 20 * day, originalPurchaseDate: t0 - 10 * day,
                                  expiresDate: t0 + 50 * day, price: 9_990, currency: "USD")
        let renewal = RenewalFacts(originalTransactionId: otid, autoRenewProductId: "pro.monthly", productId: "pro.monthly",
                                   autoRenewStatus: 1, renewalDate: t0 + 50 * day, renewalPrice: 9_990, currency: "USD", signedDate: at)
        return SubscriptionSnapshot(status: 1, transaction: tx, renewal: renewal, asOf: at)
    }

    /// One poll of `otid` as the poller builds it, from the stored snapshot to `current`.
    static func write(_ otid: String, previous: SubscriptionSnapshot?, current: SubscriptionSnapshot, at: Date) -> PollWrite {
        let events = ChangeDetector.events(previous: previous, current: current, asOf: at).events
        let item = ClaimedItem(originalTransactionId: otid, reason: "period_end", attempts: 1, environment: .production,
                               receiptData: nil, appAccountToken: UUID(), customerRef: "ref-\(otid)", snapshot: previous,
                               segment: nil, latestTransactionId: nil, historyRevision: nil, liveEpisodes: [])
        return PollWrite(item: item, outcome: .polled(.init(
            snapshot: current, stale: false, environment: .production, historyRevision: nil, receiptLatest: nil,
            transactions: [], events: events, segment: SegmentState.next(previous: nil, snapshot: current, asOf: at),
            winback: WinbackPlanner.decide(previous: previous, current: current, asOf: at))))
    }

    static func run(_ db: PostgresConnection, at: Date) throws -> Int64 {
        try db.query("INSERT INTO churnwatch.runs (kind, as_of) VALUES ('nightly', \(at)) RETURNING id")[0].decode(Int64.self, "id")
    }

    @Test("holdout draws are stable and fall below a share about that share of the time over 10,000 entries")
    func holdoutDrawDistribution() async throws {
        try await FreshDatabase.with { fresh in
            _ = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let keys = (0..<10_000).map { (originalTransactionId: "2000\($0)", campaign: WinbackCampaign.saveOffer, episode: "period:w\($0)") }
            let draws = try await store.holdoutDraws(keys)
            let again = try await ChurnStore(pool: fresh.pool(size: 1), logger: .store).holdoutDraws(keys)
            #expect(draws == again, "the same entry always draws the same number")
            #expect(draws.allSatisfy { $0 >= 0 && $0 < 1 })
            // Binomial standard deviation at n = 10,000: 0.003 for 0.1, 0.0046 for 0.3; 3.5 sigma.
            for (share, tolerance) in [(0.1, 0.0105), (0.3, 0.016)] {
                let held = Double(draws.filter { $0 < share }.count) / Double(draws.count)
                #expect(abs(held - share) < tolerance, "share \(share): \(held)")
            }
            let otherCampaign = try await store.holdoutDraws(keys.prefix(1000).map { ($0.originalTransactionId, .billingFix, $0.episode) })
            #expect(zip(otherCampaign, draws).filter { $0 == $1 }.isEmpty, "the campaign is part of the draw")
        }
    }

    @Test("new entries get their campaign's offer; held-out ones (draw below the share) are never claimed")
    func offersAndHoldoutOnNewEntries() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await store.offersSet(CampaignOffer(campaign: .saveOffer, productId: nil, offerId: "save.all", holdout: 0.5))
            try await store.offersSet(CampaignOffer(campaign: .saveOffer, productId: "other.product", offerId: "save.other", holdout: 0))
            let ids = (0..<200).map { "3000\($0)" }
            let runId = try Self.run(db, at: Self.t0)
            try await store.pollResultsCommit(runId: runId, asOf: Self.t0, detectedAt: Self.t0, ids.map {
                Self.write($0, previous: Self.snapshot($0, autoRenew: true, at: Self.t0 - Self.day),
                           current: Self.snapshot($0, autoRenew: false, at: Self.t0), at: Self.t0)
            })
            let rows = try db.query("""
                SELECT original_transaction_id AS id, episode, status, holdout, offer_id FROM churnwatch.winback_queue ORDER BY 1
                """)
            #expect(rows.count == 200)
            let draws = try await store.holdoutDraws(try rows.map {
                (try $0.decode(String.self, "id"), WinbackCampaign.saveOffer, try $0.decode(String.self, "episode"))
            })
            var held = 0
            for (row, draw) in zip(rows, draws) {
                #expect(try row.decode(String?.self, "offer_id") == "save.all", "the all-products offer applies to pro.monthly")
                let isHeld = try row.decode(Bool.self, "holdout")
                #expect(isHeld == (draw < 0.5))
                #expect(try row.decode(String.self, "status") == (isHeld ? "held_out" : "pending"))
                if isHeld { held += 1 }
            }
            #expect((60...140).contains(held), "held out \(held) of 200 at 0.5")
            let claim = try await store.database.winbackClaim(campaign: .saveOffer, consumer: "c", limit: 1000, lease: 900, asOf: Self.t0)
            #expect(claim.entries.count == 200 - held)
            #expect(claim.entries.allSatisfy { !$0.holdout && $0.offerId == "save.all" })
            // A consumer that claims pending rows with SQL never sees held-out ones either.
            #expect(try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE status = 'pending'")[0].decode(Int.self, at: 0) == 0)
        }
    }

    @Test("outcomes are recorded for treated and held-out entries from later polls, with the renewal price")
    func outcomesFromLaterPolls() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await store.offersSet(CampaignOffer(campaign: .saveOffer, productId: "pro.monthly", offerId: "save.pro", holdout: 0.5))
            let ids = (0..<40).map { "4000\($0)" }
            let leaving = Dictionary(uniqueKeysWithValues: ids.map { ($0, Self.snapshot($0, autoRenew: false, at: Self.t0)) })
            try await store.pollResultsCommit(runId: try Self.run(db, at: Self.t0), asOf: Self.t0, detectedAt: Self.t0, ids.map {
                Self.write($0, previous: Self.snapshot($0, autoRenew: true, at: Self.t0 - Self.day), current: leaving[$0]!, at: Self.t0)
            })
            #expect(try db.query("SELECT count(*) FROM churnwatch.subscription_segments WHERE renewal_price = 9990 AND renewal_currency = 'USD'")[0]
                .decode(Int.self, at: 0) == 40)
            // The next night the first half turned auto-renew back on; the others stay off.
            let t1 = Self.t0 + Self.day
            try await store.pollResultsCommit(runId: try Self.run(db, at: t1), asOf: t1, detectedAt: t1, ids.enumerated().map { i, id in
                Self.write(id, previous: leaving[id]!, current: Self.snapshot(id, autoRenew: i < 20, at: t1), at: t1)
            })
            // A good sign decides nothing yet: it is kept, and dates the save if it still stands at the period's end.
            #expect(try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE outcome IS NULL")[0].decode(Int.self, at: 0) == 40)
            #expect(try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE good_sign_at IS NOT NULL")[0].decode(Int.self, at: 0) == 20)
            let open = try await store.outcomeSummaries(since: nil, grouping: .offer, asOf: t1)
            #expect(open.first.map { $0.decided + $0.holdoutDecided } == 0, "nothing is decided before the period's end")

            // The period ends: the first half renews, the others expire.
            let t2 = Self.t0 + 20 * Self.day + 3600
            try await store.pollResultsCommit(runId: try Self.run(db, at: t2), asOf: t2, detectedAt: t2, ids.enumerated().map { i, id in
                let before = Self.snapshot(id, autoRenew: i < 20, at: t1)
                return Self.write(id, previous: before, current: i < 20 ? Self.renewed(id, at: t2) : Self.snapshot(id, autoRenew: false, at: t2, winBack: []),
                                  at: t2)
            })
            let saved = try db.query("""
                SELECT original_transaction_id AS id, outcome_reason, outcome_at, outcome_price, outcome_currency
                FROM churnwatch.winback_queue WHERE outcome = 'saved' ORDER BY 1
                """)
            #expect(try saved.map { try $0.decode(String.self, "id") } == Array(ids.prefix(20)).sorted())
            #expect(try saved.allSatisfy { try $0.decode(String?.self, "outcome_reason") == "renewed"
                && $0.decode(Date?.self, "outcome_at").map { $0 > Self.t0 && $0 <= t1 } == true
                && $0.decode(Int64?.self, "outcome_price") == 9_990 && $0.decode(String?.self, "outcome_currency") == "USD" },
                    "saved by the renewal, dated by the sign")
            #expect(try db.query("SELECT count(*) FROM churnwatch.winback_queue WHERE outcome = 'lost' AND outcome_reason = 'expired'")[0]
                .decode(Int.self, at: 0) == 20)

            let summaries = try await store.outcomeSummaries(since: nil, grouping: .offer, asOf: t2)
            let s = try #require(summaries.first { $0.campaign == "save_offer" })
            #expect(s.offerId == "save.pro")
            #expect(summaries.map(\.campaign) == ["save_offer", "winback_offer"], "those who left get a win-back entry at t2")
            #expect(s.entries + s.holdoutEntries == 40)
            #expect(s.saved + s.holdoutSaved == 20 && s.decided + s.holdoutDecided == 40)
            #expect(s.revenueKept == (s.saved > 0 ? ["USD": Int64(s.saved) * 9_990] : [:]))
            #expect(s.medianDaysToSave.map { $0 >= 0 && $0 <= 1 } ?? (s.saved == 0), "from the opening night to the sign")
            #expect(try await store.outcomeSummaries(since: t1, grouping: .offer, asOf: t2).map(\.campaign) == ["winback_offer"],
                    "--since cuts by the night an entry was opened")

            // Past the horizon (the period's end, plus the settle window) open ones would count as lost: all are decided.
            let late = try await store.outcomeSummaries(since: nil, grouping: .campaign, asOf: Self.t0 + 22 * Self.day)
            #expect(late.first.map { $0.decided + $0.holdoutDecided } == 40)
            #expect(late.first?.offerId == nil)
        }
    }

    @Test("offers set replaces, list shows, remove removes only the named one")
    func offersConfiguration() async throws {
        try await FreshDatabase.with { fresh in
            _ = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            try await store.offersSet(CampaignOffer(campaign: .saveOffer, productId: nil, offerId: "a", holdout: 0.1))
            try await store.offersSet(CampaignOffer(campaign: .saveOffer, productId: nil, offerId: "b", holdout: 0.2))
            try await store.offersSet(CampaignOffer(campaign: .saveOffer, productId: "pro.monthly", offerId: "c", holdout: 0))
            let list = try await store.offersList()
            #expect(list.map(\.offerId) == ["b", "c"] && list.map(\.productId) == [nil, "pro.monthly"] && list[0].holdout == 0.2)
            #expect(try await store.database.offersConfigured(campaign: .saveOffer, apps: [store.app]))
            #expect(try await store.database.offersConfigured(campaign: .billingFix, apps: [store.app]) == false)
            #expect(try await store.offersRemove(campaign: .saveOffer, productId: nil) == 1)
            #expect(try await store.offersRemove(campaign: .saveOffer, productId: nil) == 0)
            #expect(try await store.offersList().map(\.offerId) == ["c"])
        }
    }

    @Test("pending winback_offer entries follow Apple's current win-back offer ids; claimed ones keep what was sent")
    func winbackOfferIdsKeptFresh() async throws {
        try await FreshDatabase.with { fresh in
            let db = try WinbackQueueTests.migrated(fresh)
            let store = ChurnStore(pool: fresh.pool(size: 1), logger: .store)
            let pending = try WinbackQueueTests.entry(db, "5001", campaign: "winback_offer", episode: "expired:w-5001", offers: ["old"])
            let claimed = try WinbackQueueTests.entry(db, "5001", campaign: "winback_offer", episode: "expired:earlier", status: "claimed",
                                                      claimedBy: "m", offers: ["old"])
            let at = Self.t0 + 25 * Self.day
            try await store.pollResultsCommit(runId: try Self.run(db, at: at), asOf: at, detectedAt: at, [
                Self.write("5001", previous: Self.snapshot("5001", autoRenew: false, at: at - Self.day, winBack: ["old"]),
                           current: Self.snapshot("5001", autoRenew: false, at: at, winBack: ["wb.best", "wb.next"]), at: at),
            ])
            func offers(_ id: Int64) throws -> [String] {
                try db.query("SELECT offer_ids FROM churnwatch.winback_queue WHERE id = \(id)")[0].decode([String].self, at: 0)
            }
            #expect(try offers(pending) == ["wb.best", "wb.next"])
            #expect(try offers(claimed) == ["old"])
            #expect(try db.query("SELECT count(*) FROM churnwatch.winback_queue")[0].decode(Int.self, at: 0) == 2, "same episode: no new entry")
        }
    }
}
