import AppStoreModels
import Foundation
import Synchronization
import Testing
@testable import AppStoreSimulator

/// A count shared with a receiver's handler.
final class Counter: Sendable {
    private let value = Mutex(0)

    /// The count before this call.
    func next() -> Int { value.withLock { n in defer { n += 1 }; return n } }
}

/// The simulated customers' cancel page: views posted as Apple posts real-time requests, what
/// they show, and the default when the answer is late, failed, invalid or not approved.
@Suite struct CancelPageTests {
    static func options(url: String?, timeoutMs: Int64 = 30_000, effect: Double = 0) -> SimulatorOptions {
        var o = SimulatorOptions()
        o.retention.productionURL = url
        o.retention.timeoutMs = timeoutMs
        o.retention.effect.message = effect
        o.retention.effect.alternateProduct = effect
        o.retention.effect.promotionalOffer = effect
        // About one subscription in a thousand turns auto-renew off per day: every one is viewed, and browsing is frequent.
        o.retention.cancelPageShare = 1
        o.retention.browsePer30Days = 0.1
        return o
    }

    @Test("views are posted with signed requests that match the truth; POST /_sim/clock returns once they are decided")
    func postedViews() async throws {
        let message = UUID().uuidString.lowercased()
        let receiver = try LoopbackReceiver { _ in .json("{\"message\":{\"messageIdentifier\":\"\(message.uppercased())\"}}") }
        defer { receiver.stop() }
        let sim = try await SimHarness.start(subscribers: 1500, options: Self.options(url: receiver.url))
        defer { Task { try? await sim.stop() } }
        let viewer = CancelPageViewer(service: sim.service)
        #expect(try await sim.messaging("PUT", "message/\(message)", json: ["header": "Stay", "body": "Please"]).status == 200)
        let start = sim.now
        let moved = try await sim.post("/_sim/clock?advance=10d")
        #expect((moved.json as? [String: String])?["now"] == SimTime.format(start + 10 * SimTime.day), "not held once answered")
        let views = try await sim.cancelPageViews()
        let summary = try await sim.cancelPageSummary()
        await viewer.shutdown()

        let intending = views.filter { $0["intends_cancel"] as? Bool == true }
        #expect(intending.count >= 5 && views.count > intending.count, "\(intending.count) cancelling of \(views.count)")
        #expect(views.allSatisfy { $0["shown"] as? String == "message" && $0["message_identifier"] as? String == message },
                "why the default was shown: \(Set(views.compactMap { $0["default_reason"] as? String }))")
        #expect(views.allSatisfy { $0["http_status"] as? Int == 200 && $0["posted"] as? Bool == true && $0["averted"] as? Bool == false })
        #expect(summary["views"] as? Int == views.count && summary["posted"] as? Int == views.count)
        #expect((summary["shown"] as? [String: Int])?["message"] == views.count && summary["true_effect"] as? Double == 0)
        #expect(receiver.requests.count == views.count, "one attempt per view")

        let verifier = try TestJWSVerifier(rootDER: sim.identity.chain.rootDER)
        let byId = Dictionary(uniqueKeysWithValues: views.map { ($0["request_identifier"] as! String, $0) })
        let p = sim.population
        for r in receiver.requests {
            let payload = try await realtimeRequest(r.body, verifier: verifier)
            let view = try #require(byId[payload.requestIdentifier])
            let i = try #require(p.locate(transactionId: payload.originalTransactionId)).subscriber
            #expect(view["original_transaction_id"] as? String == payload.originalTransactionId)
            #expect(view["at"] as? String == SimTime.format(payload.signedDate.rawValue))
            #expect(payload.signedDate.rawValue > start && payload.signedDate.rawValue <= start + 10 * SimTime.day)
            #expect(view["product_id"] as? String == payload.productId)
            #expect(payload.productId == p.catalog.products[p.state(i, at: payload.signedDate.rawValue).latest.product].id)
            #expect(view["user_locale"] as? String == payload.userLocale && CancelPagePlan.locales.map(\.0).contains(payload.userLocale))
            #expect(payload.rawEnvironment == p.environment(i) && payload.appAppleId == p.config.appAppleId)
            let at = payload.signedDate.rawValue
            let cancels = p.timeline(i).contains { $0.kind == .autoRenewOff && $0.time > at && $0.time <= at + 10 * SimTime.minute }
            if view["intends_cancel"] as? Bool == true { #expect(cancels, "a cancellation follows within 10 minutes") }
        }
        let locales = Set(views.compactMap { $0["user_locale"] as? String })
        #expect(locales.contains("en-US"))
    }

    @Test("a late, failed, invalid or unapproved answer shows the default (the configured one); nothing is averted")
    func defaults() async throws {
        let approved = UUID().uuidString.lowercased()
        let counter = Counter()
        let receiver = try LoopbackReceiver { request in
            let valid = "{\"message\":{\"messageIdentifier\":\"\(approved)\"}}"
            switch counter.next() % 6 {
            case 0:
                Thread.sleep(forTimeInterval: 6)  // slower than the 3 s this test's App Store waits
                return .json(valid)
            case 1: return LoopbackReceiver.Response(status: 500)
            case 2: return .json("{}")
            case 3: return .json("{\"message\":{\"messageIdentifier\":\"\(approved)\"},\"alternateProduct\":{\"messageIdentifier\":\"\(approved)\",\"productId\":\"x\"}}")
            case 4: return .json("{\"message\":{\"messageIdentifier\":\"\(UUID().uuidString)\"}}")
            default:
                let product = unverifiedRealtimeRequest(request.body)?.productId ?? ""
                let other = product.hasPrefix("sim.premium") ? "sim.storage.2tb.monthly" : "sim.premium.ultimate.monthly"
                return .json("{\"alternateProduct\":{\"messageIdentifier\":\"\(approved)\",\"productId\":\"\(other)\"}}")
            }
        }
        defer { receiver.stop() }
        let sim = try await SimHarness.start(subscribers: 1500, options: Self.options(url: receiver.url, timeoutMs: 3000, effect: 1))
        defer { Task { try? await sim.stop() } }
        #expect(try await sim.messaging("PUT", "message/\(approved)", json: ["header": "Stay", "body": "Please"]).status == 200)
        let products = sim.population.catalog.products.map(\.id)
        for product in products {
            #expect(try await sim.messaging("PUT", "default/\(product)/en-US", json: ["messageIdentifier": approved]).status == 200)
        }
        let viewer = CancelPageViewer(service: sim.service)
        sim.service.clock.advance(by: 10 * SimTime.day)
        await viewer.catchUp(to: sim.service.clock.rawNow())
        #expect(sim.service.clock.now() == sim.service.clock.rawNow())
        let views = try await sim.cancelPageViews()
        let summary = try await sim.cancelPageSummary()
        await viewer.shutdown()

        #expect(views.count >= 12 && views.allSatisfy { $0["shown"] as? String == "default" && $0["averted"] as? Bool == false })
        let reasons = Dictionary(grouping: views) { $0["default_reason"] as? String ?? "-" }.mapValues(\.count)
        // On a machine too loaded to answer within the wait, an answer is also "late".
        #expect(Set(reasons.keys).subtracting(["late"]) == ["timed_out", "http_status", "invalid_body", "not_approved", "invalid_alternate_product"],
                "\(reasons)")
        for v in views where v["default_reason"] as? String == "timed_out" {
            #expect(v["http_status"] is NSNull && (v["latency_ms"] as? Int ?? 0) >= 3000)
        }
        for v in views where v["default_reason"] as? String == "http_status" { #expect(v["http_status"] as? Int == 500) }
        // The default shown is the one configured for the product and locale.
        for v in views {
            let expected: String? = v["user_locale"] as? String == "en-US" ? approved : nil
            #expect(v["message_identifier"] as? String == expected)
        }
        #expect(summary["averted"] as? Int == 0 && summary["true_effect"] is NSNull)
        let p = sim.population
        for v in views where v["intends_cancel"] as? Bool == true {
            let i = try #require(p.locate(transactionId: v["original_transaction_id"] as! String)).subscriber
            let at = try #require(SimTime.parse(v["at"] as! String))
            #expect(p.timeline(i).contains { $0.kind == .autoRenewOff && $0.time > at && $0.time <= at + 10 * SimTime.minute })
        }
    }

    @Test("without a URL views happen and show the default, posted 0; without a viewer there are none")
    func noURL() async throws {
        let sim = try await SimHarness.start(subscribers: 1500, options: Self.options(url: nil, effect: 1))
        defer { Task { try? await sim.stop() } }
        let none = try await sim.cancelPageSummary()
        #expect(none["running"] as? Bool == false && none["views"] as? Int == 0 && none["posted"] as? Int == 0)
        let viewer = CancelPageViewer(service: sim.service)
        #expect(try await sim.post("/_sim/clock?advance=6d").status == 200)
        let summary = try await sim.cancelPageSummary()
        let views = try await sim.cancelPageViews()
        await viewer.shutdown()
        #expect(summary["running"] as? Bool == true && summary["posted"] as? Int == 0 && summary["answered"] as? Int == 0)
        #expect(views.count > 5 && summary["views"] as? Int == views.count && summary["averted"] as? Int == 0)
        #expect(views.allSatisfy { $0["default_reason"] as? String == "no_url" && $0["posted"] as? Bool == false })
    }
}
