import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct EndpointTests {
    @Test func statusResponseHasApplesShape() async throws {
        let sim = try await SimHarness.start(subscribers: 600)
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        // A customer with subscriptions in both groups answers both, whichever id is asked.
        let i = try #require(sim.productionSubscribers.first { pop.records[$0].partner >= 0 })
        let partner = Int(pop.records[i].partner)
        for asked in [pop.originalTransactionId(i), pop.transactionId(partner, 0)] {
            let r = try await sim.get("/inApps/v1/subscriptions/\(asked)")
            #expect(r.status == 200)
            #expect(r.headers["content-type"] == "application/json")
            let s = try r.decode(StatusResponse.self)
            #expect(s.environment == .production)
            #expect(s.bundleId == pop.config.bundleId)
            #expect(s.appAppleId == pop.config.appAppleId)
            #expect(s.data?.map(\.subscriptionGroupIdentifier) == ["21500001", "21500002"])
            let ids = Set(s.data!.flatMap { $0.lastTransactions! }.map(\.originalTransactionId))
            #expect(ids == [pop.originalTransactionId(i), pop.originalTransactionId(partner)])
        }
    }

    @Test func statusFilterAndBadStatus() async throws {
        let sim = try await SimHarness.start(subscribers: 300)
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let i = sim.productionSubscribers[0]
        let status = pop.state(i, at: pop.config.start).status
        let other = status == 1 ? 2 : 1
        let path = "/inApps/v1/subscriptions/\(pop.originalTransactionId(i))"
        let match = try await sim.get(path + "?status=\(status)&status=4").decode(StatusResponse.self)
        #expect(match.data?.contains { $0.lastTransactions?.first?.originalTransactionId == pop.originalTransactionId(i) } == true)
        let none = try await sim.get(path + "?status=\(other)").decode(StatusResponse.self)
        #expect(none.data?.contains { $0.lastTransactions?.first?.originalTransactionId == pop.originalTransactionId(i) } == false)
        let bad = try await sim.get(path + "?status=9")
        #expect(bad.status == 400)
        #expect(try bad.decode(ErrorPayload.self).errorCode == 4_000_031)
    }

    @Test func unknownInThisEnvironmentIs4040010() async throws {
        let sim = try await SimHarness.start(subscribers: 400) { $0.sandboxShare = 0.3 }
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let prod = sim.productionSubscribers[0]
        let sandbox = try #require((0..<pop.count).first { pop.isSandbox($0) })
        for (id, onSandbox) in [(pop.originalTransactionId(prod), true), (pop.originalTransactionId(sandbox), false), ("299999999999999", false)] {
            for path in ["/inApps/v1/subscriptions/", "/inApps/v2/history/", "/inApps/v1/transactions/", "/inApps/v2/refund/lookup/"] {
                let r = try await sim.get(path + id, sandbox: onSandbox)
                #expect(r.status == 404, "\(path)\(id)")
                let e = try r.decode(ErrorPayload.self)
                #expect(e.errorCode == 4_040_010)
                #expect(e.errorMessage == "Transaction id not found.")
            }
        }
        // The sandbox host serves the sandbox subscriber.
        let ok = try await sim.get("/inApps/v1/subscriptions/\(pop.originalTransactionId(sandbox))", sandbox: true)
        #expect(ok.status == 200)
        #expect(try ok.decode(StatusResponse.self).environment == .sandbox)
        #expect(try await sim.get("/inApps/v1/subscriptions/abc").status == 400)
    }

    @Test func transactionInfoServesAnyTransactionOfTheSubscription() async throws {
        let sim = try await SimHarness.start(subscribers: 300)
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let i = try #require(sim.productionSubscribers.first { pop.state($0, at: pop.config.start).transactionCount >= 3 })
        let count = pop.state(i, at: pop.config.start).transactionCount
        for k in [0, 1, count - 1] {
            let r = try await sim.get("/inApps/v1/transactions/\(pop.transactionId(i, k))")
            let jws = try #require(try r.decode(TransactionInfoResponse.self).signedTransactionInfo)
            let t = try payload(jws, as: JWSTransactionDecodedPayload.self)
            #expect(t.transactionId == pop.transactionId(i, k))
            #expect(t.originalTransactionId == pop.originalTransactionId(i))
            #expect(t.webOrderLineItemId == pop.webOrderLineItemId(i, k))
            #expect(t.transactionReason == (k == 0 ? .purchase : t.transactionReason))
        }
        // A transaction that has not happened yet at the simulated now does not exist.
        #expect(try await sim.get("/inApps/v1/transactions/\(pop.transactionId(i, count))").status == 404)
    }

    @Test func historyPagesTwentyAtATimeWithRevision() async throws {
        let sim = try await SimHarness.start(subscribers: 1500)
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        let now = pop.config.start
        func total(_ i: Int) -> Int {
            pop.customerSubscriptions(i).map { pop.stateAndTransactions($0, at: now).1.count }.reduce(0, +)
        }
        let i = try #require(sim.productionSubscribers.max { total($0) < total($1) })
        let total = total(i)
        #expect(total > 20)
        let base = "/inApps/v2/history/\(pop.originalTransactionId(i))"
        var seen: [JWSTransactionDecodedPayload] = []
        var revision: String?
        var pages = 0
        repeat {
            let r = try await sim.get(base + (revision.map { "?revision=\($0)" } ?? ""))
            #expect(r.status == 200)
            let h = try r.decode(HistoryResponse.self)
            #expect(h.bundleId == pop.config.bundleId)
            #expect(h.environment == .production)
            #expect(h.signedTransactions!.count <= 20)
            if h.hasMore == true { #expect(h.signedTransactions!.count == 20) }
            seen += try h.signedTransactions!.map { try payload($0, as: JWSTransactionDecodedPayload.self) }
            revision = h.revision
            pages += 1
            if h.hasMore != true { break }
        } while pages < 20
        #expect(seen.count == total)
        #expect(Set(seen.map(\.transactionId)).count == total)
        #expect(pages == (total + 19) / 20)
        // Ascending by modification time: purchase dates ascend for unmodified transactions.
        let plain = seen.filter { $0.revocationDate == nil && $0.isUpgraded == nil }
        #expect(zip(plain, plain.dropFirst()).allSatisfy { $0.purchaseDate! <= $1.purchaseDate! })
        // A revision is tied to its filters.
        let mismatch = try await sim.get(base + "?revision=\(revision!)&sort=DESCENDING")
        #expect(mismatch.status == 400)
        #expect(try mismatch.decode(ErrorPayload.self).errorCode == 4_000_005)
        #expect(try await sim.get(base + "?revision=garbage").status == 400)
        // Descending starts with the newest.
        let desc = try await sim.get(base + "?sort=DESCENDING").decode(HistoryResponse.self)
        let first = try payload(desc.signedTransactions![0], as: JWSTransactionDecodedPayload.self)
        #expect(first.purchaseDate == seen.map { $0.purchaseDate! }.max())
        // Filters.
        let g = pop.groupId(i)
        let byGroup = try await sim.get(base + "?subscriptionGroupIdentifier=\(g)&productType=AUTO_RENEWABLE").decode(HistoryResponse.self)
        #expect(try byGroup.signedTransactions!.allSatisfy { try payload($0, as: JWSTransactionDecodedPayload.self).subscriptionGroupIdentifier == g })
        let consumables = try await sim.get(base + "?productType=CONSUMABLE").decode(HistoryResponse.self)
        #expect(consumables.signedTransactions == [])
        #expect(consumables.hasMore == false)
        #expect(try await sim.get(base + "?productType=GADGET").status == 400)
        #expect(try await sim.get(base + "?startDate=20&endDate=10").status == 400)
        let windowed = try await sim.get(base + "?startDate=\(now - 90 * SimTime.day)&endDate=\(now)").decode(HistoryResponse.self)
        #expect(try windowed.signedTransactions!.allSatisfy {
            let p = try payload($0, as: JWSTransactionDecodedPayload.self).purchaseDate!.rawValue
            return p >= now - 90 * SimTime.day && p < now
        })
    }

    @Test func aStoredRevisionReturnsTransactionsModifiedLater() async throws {
        let sim = try await SimHarness.start(subscribers: 3000)
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        // A refund after the start: the refunded transaction reappears after the final revision.
        let (i, refund) = try #require(sim.productionSubscribers.lazy.compactMap { i -> (Int, TimelineEvent)? in
            guard pop.records[i].partner < 0,
                let e = pop.timeline(i).first(where: { $0.kind == .refund && $0.time > pop.config.start + SimTime.day })
            else { return nil }
            return (i, e)
        }.first)
        _ = try await sim.post("/_sim/clock?set=\(SimTime.format(refund.time - SimTime.hour))")
        let base = "/inApps/v2/history/\(pop.originalTransactionId(i))"
        var revision: String?
        while true {
            let h = try await sim.get(base + (revision.map { "?revision=\($0)" } ?? "")).decode(HistoryResponse.self)
            revision = h.revision
            if h.hasMore != true { break }
        }
        _ = try await sim.post("/_sim/clock?set=\(SimTime.format(refund.time + SimTime.hour))")
        let later = try await sim.get(base + "?revision=\(revision!)").decode(HistoryResponse.self)
        let txs = try later.signedTransactions!.map { try payload($0, as: JWSTransactionDecodedPayload.self) }
        #expect(txs.count == 1)
        #expect(txs.first?.revocationDate?.rawValue == refund.time)
        // Refund history lists it too, and a stored refund revision returns only newer refunds.
        let refunds = try await sim.get("/inApps/v2/refund/lookup/\(pop.originalTransactionId(i))").decode(RefundHistoryResponse.self)
        let refunded = try refunds.signedTransactions!.map { try payload($0, as: JWSTransactionDecodedPayload.self) }
        #expect(refunded.last?.revocationDate?.rawValue == refund.time)
        let again = try await sim.get("/inApps/v2/refund/lookup/\(pop.originalTransactionId(i))?revision=\(refunds.revision!)")
            .decode(RefundHistoryResponse.self)
        #expect(again.signedTransactions == [])
        #expect(again.hasMore == false)
    }
}
