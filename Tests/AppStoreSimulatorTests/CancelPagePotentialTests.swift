import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// The cancel page's potential outcomes (`CancelPagePotential`, `GET /_sim/retention/potential`):
/// the truth per-arm estimates are measured against.
@Suite struct CancelPagePotentialTests {
    static func retention() throws -> RetentionOptions {
        var retention = RetentionOptions()
        retention.effect = try #require(CancelPageEffect.parse("message=0.3,alternate_product=0.4,promotional_offer=0.5"))
        retention.effect.arms = try CancelPageEffect.parseArms(
            "offer:SAVE50=0.8,message:\(CancelPageArmRun.m2)=0.6,product:\(CancelPageArmRun.premiumTarget)=0.7")
        retention.offers = try CancelPageOfferTerms.parse("SAVE50=0.5x1")
        return retention
    }

    /// `/_sim/retention/potential`'s views.
    static func potential(_ sim: SimHarness, query: String = "") async throws -> (SimHarness.Response, [[String: Any]]) {
        let r = try await sim.get("/_sim/retention/potential" + query, token: "")
        return (r, ((r.json as? [String: Any])?["views"] as? [[String: Any]]) ?? [])
    }

    @Test("a subscription shown one answer at every view up to the horizon ends as y of that answer; shown the default, as y_default")
    func consistentWithRealized() async throws {
        let retention = try Self.retention()
        // Frequent browsing: views by customers who do not mean to cancel yet, before a cancellation in the same period.
        let run = try await CancelPageArmRun.start(retention, days: 100, browsePer30Days: 3)
        let records = run.records
        let until = min(run.viewer.processedUntil, run.sim.service.clock.now())
        let (_, views) = try await Self.potential(run.sim)
        await run.stop()

        let p = run.sim.population, catalog = p.catalog
        let bySubscriber = Dictionary(grouping: records) { $0.view.subscriber }
        var checked: [String: Int] = [:]
        var stickyRequests: [String: Bool] = [:]
        for r in records where until > r.potential.horizon + SimTime.second {
            let i = Int(r.view.subscriber), h = r.potential.horizon
            let window = bySubscriber[r.view.subscriber]!.filter { $0.view.time >= r.view.time && $0.view.time < h }
            let keys = Set(window.map { CancelPageEffect.answerKey($0.judgement, catalog: catalog) })
            stickyRequests[CancelPagePlan.requestIdentifier(p, r.view)] = keys.count == 1
            guard keys.count == 1 else { continue }
            let realized = CancelPagePotential.subscribed(p, i, past: h)
            let expected = r.judgement.shown == .standard
                ? r.potential.yDefault : r.potential.y(retention.effect.probability(r.judgement, catalog: catalog))
            #expect(realized == expected, "\(keys) \(r.potential) averted \(window.map(\.averted))")
            let treated = r.judgement.shown == .standard ? "default" : "treated"
            checked["\(treated) y_default=\(r.potential.yDefault) realized=\(realized)", default: 0] += 1
            if !r.view.intendsCancel && !r.potential.yDefault && realized { checked["saved by a later view", default: 0] += 1 }
        }
        for key in ["treated y_default=false realized=true", "treated y_default=false realized=false",
                    "treated y_default=true realized=true", "default y_default=false realized=false",
                    "default y_default=true realized=true", "saved by a later view"] {
            #expect(checked[key, default: 0] >= 2, "\(key): \(checked)")
        }
        // The same through the endpoint: realized is y of the answer shown (sticky subscriptions).
        var viaEndpoint = 0
        for v in views {
            guard let realized = v["realized"] as? Bool, stickyRequests[v["request_identifier"] as! String] == true else { continue }
            let key = v["answer_key"] as! String
            let y = v["y"] as! [String: Bool]
            #expect(realized == (key == "default" ? v["y_default"] as? Bool : y[key]), "\(v)")
            viaEndpoint += 1
        }
        #expect(viaEndpoint >= 20)
    }

    @Test("one draw for every answer: y is true for every key at least as likely as a key it is true for")
    func commonDraw() async throws {
        let run = try await CancelPageArmRun.start(try Self.retention(), days: 40)
        let (_, views) = try await Self.potential(run.sim)
        await run.stop()

        var split = 0
        for v in views {
            let y = try #require(v["y"] as? [String: Bool]), effect = try #require(v["effect"] as? [String: Double])
            #expect(Set(y.keys) == Set(effect.keys))
            if v["y_default"] as? Bool == true { #expect(y.values.allSatisfy { $0 }, "y_default: saved whatever is shown") }
            for (a, pa) in effect {
                for (b, pb) in effect where pa <= pb {
                    #expect(!(y[a]! && !y[b]!), "\(a)=\(pa) saves but \(b)=\(pb) does not: \(v)")
                }
            }
            if Set(y.values).count == 2 { split += 1 }
        }
        #expect(split >= 3, "views whose outcome depends on the answer: \(split) of \(views.count)")
    }

    @Test("GET /_sim/retention/potential: per subscription its first posted view in the window, y, revenue and effect by key")
    func endpointShape() async throws {
        let run = try await CancelPageArmRun.start(try Self.retention(), days: 40)
        let sim = run.sim
        let (response, views) = try await Self.potential(sim)
        let top = try #require(response.json as? [String: Any])
        let all = try await sim.cancelPageViews()
        let start = sim.service.clock.now() - 30 * SimTime.day, end = start + 5 * SimTime.day
        let window = "?from=\(SimTime.format(start))&to=\(SimTime.format(end))"
        let (_, windowed) = try await Self.potential(sim, query: window)
        let bad = try await sim.get("/_sim/retention/potential?from=yesterday", token: "")
        let now = sim.service.clock.now()
        await run.stop()

        #expect(response.status == 200 && bad.status == 400)
        #expect(top["processed_until"] as? String == SimTime.format(run.viewer.processedUntil) && top["from"] != nil && top["to"] != nil)
        var firstPosted: [String: [String: Any]] = [:]
        for v in all where v["posted"] as? Bool == true && firstPosted[v["original_transaction_id"] as! String] == nil {
            firstPosted[v["original_transaction_id"] as! String] = v
        }
        #expect(views.count == firstPosted.count && views.count >= 50)
        #expect(!windowed.isEmpty && windowed.count < views.count)
        #expect(windowed.allSatisfy { SimTime.parse($0["at"] as! String)! >= start && SimTime.parse($0["at"] as! String)! < end })

        let p = sim.population, catalog = p.catalog
        let fields: Set<String> = ["original_transaction_id", "at", "request_identifier", "horizon", "intends_cancel", "shown",
                                   "answer_key", "y_default", "y", "revenue_per_save", "effect", "realized"]
        let arms = ["offer:SAVE50": 0.8, "message:\(CancelPageArmRun.m2)": 0.6, "product:\(CancelPageArmRun.premiumTarget)": 0.7]
        var shownKinds = Set<String>()
        for v in views {
            #expect(Set(v.keys) == fields)
            let id = v["original_transaction_id"] as! String
            #expect(v["request_identifier"] as? String == firstPosted[id]?["request_identifier"] as? String, "the first posted view")
            let at = try #require(SimTime.parse(v["at"] as! String)), horizon = try #require(SimTime.parse(v["horizon"] as! String))
            #expect(horizon > at)
            #expect((v["realized"] is NSNull) == (horizon + SimTime.second >= now), "realized once the clock passed the horizon")
            let shown = v["shown"] as! String, key = v["answer_key"] as! String
            shownKinds.insert(shown)
            let prefix = ["default": "default", "message": "message:", "alternate_product": "product:", "promotional_offer": "offer:"][shown]!
            #expect(key.hasPrefix(prefix), "\(shown) \(key)")
            let y = v["y"] as! [String: Bool], effect = v["effect"] as! [String: Double]
            let revenue = v["revenue_per_save"] as! [String: Any]
            var keys = Set(CancelPageEffect.kindKeys).union(arms.keys)
            if shown != "default" { keys.insert(key) }
            #expect(Set(y.keys) == keys && Set(revenue.keys) == keys)
            #expect(effect["message"] == 0.3 && effect["alternate_product"] == 0.4 && effect["promotional_offer"] == 0.5)
            for (k, pk) in arms { #expect(effect[k] == pk) }
            if key == "offer:SAVE20" { #expect(effect[key] == 0.5, "no override: the kind's") }
            #expect(revenue["message"] as? Double == 1 && revenue["offer:SAVE50"] as? Double == 0.5)
            #expect(revenue["promotional_offer"] as? Double == (key == "offer:SAVE50" ? 0.5 : 1))
            let i = try #require(p.locate(transactionId: id)).subscriber
            let before = p.state(i, at: at - 1)
            let ratio = Double(catalog.price(product: 0, tier: 0)) / Double(catalog.price(product: before.autoRenewProduct, tier: before.latest.priceTier))
            let productRevenue = try #require(revenue["product:\(CancelPageArmRun.premiumTarget)"] as? Double)
            #expect(abs(productRevenue - (before.autoRenewProduct == 0 ? 1 : ratio)) < 1e-12)
        }
        #expect(shownKinds == ["default", "message", "alternate_product", "promotional_offer"])
    }
}
