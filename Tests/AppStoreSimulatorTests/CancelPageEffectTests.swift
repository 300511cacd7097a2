import AppStoreModels
import Foundation
import Synchronization
import Testing
@testable import AppStoreSimulator

/// What the cancel page's answers do: cancellations averted (auto-renew stays on, renewals go on,
/// into the suggested product or at the offer) deterministically for a seed; and the clock that
/// stops just before a view until its answer is in.
@Suite struct CancelPageEffectTests {
    /// Answers by subscription (so the answer never depends on arrival order): a message, a
    /// switch to another product of the group, or a promotional offer signed for this app.
    static func answer(_ body: Data, message: String, bundleId: String) -> LoopbackReceiver.Response {
        guard let request = unverifiedRealtimeRequest(body), let id = Int64(request.originalTransactionId) else {
            return LoopbackReceiver.Response(status: 400)
        }
        let catalog = Catalog.standard
        let product = catalog.index(of: request.productId) ?? 0
        switch id / 1000 % 3 {
        case 0:
            return .json("{\"message\":{\"messageIdentifier\":\"\(message)\"}}")
        case 1:
            let target = catalog.products(inGroup: catalog.products[product].group)
                .first { $0 != product && $0 != catalog.discontinuedProduct }!
            return .json("{\"alternateProduct\":{\"messageIdentifier\":\"\(message)\",\"productId\":\"\(catalog.products[target].id)\"}}")
        default:
            let claims = "{\"bid\":\"\(bundleId)\",\"productId\":\"\(request.productId)\",\"offerIdentifier\":\"save50\",\"nonce\":\"n\"}"
            let jws = Base64URL.encode("{\"alg\":\"ES256\"}") + "." + Base64URL.encode(claims) + "." + Base64URL.encode([UInt8](repeating: 1, count: 64))
            return .json("{\"promotionalOffer\":{\"messageIdentifier\":\"\(message)\",\"promotionalOfferSignatureV2\":\"\(jws)\"}}")
        }
    }

    /// A simulator whose views for 30 days were answered by ``answer(_:message:bundleId:)``:
    /// its views and summary.
    static func run(seed: UInt64) async throws -> (SimHarness, [[String: Any]], [String: Any], LoopbackReceiver) {
        let message = "7d1c7c36-5a0e-4a57-9a39-2f1f0ad1c0de"
        let bundleId = PopulationConfig(subscribers: 1, seed: 1, start: 0).bundleId
        let receiver = try LoopbackReceiver { answer($0.body, message: message, bundleId: bundleId) }
        var options = SimulatorOptions()
        options.retention.productionURL = receiver.url
        options.retention.timeoutMs = 30_000
        options.retention.effect = CancelPageEffect.parse("message=0.5,alternate_product=1,promotional_offer=1")!
        options.retention.cancelPageShare = 1
        options.retention.browsePer30Days = 0.05
        let sim = try await SimHarness.start(subscribers: 1500, seed: seed, options: options)
        #expect(try await sim.messaging("PUT", "message/\(message)", json: ["header": "Stay", "body": "Please"]).status == 200)
        let viewer = CancelPageViewer(service: sim.service)
        sim.service.clock.advance(by: 30 * SimTime.day)
        await viewer.catchUp(to: sim.service.clock.rawNow())
        let views = try await sim.cancelPageViews()
        let summary = try await sim.cancelPageSummary()
        await viewer.shutdown()
        return (sim, views, summary, receiver)
    }

    @Test("non-default answers avert cancellations with their kind's probability: auto-renew stays on, the same for a seed")
    func averted() async throws {
        let (sim, views, summary, receiver) = try await Self.run(seed: 7)
        let (again, viewsAgain, _, receiverAgain) = try await Self.run(seed: 7)
        defer {
            receiver.stop()
            receiverAgain.stop()
            Task {
                try? await sim.stop()
                try? await again.stop()
            }
        }
        func outcome(_ v: [[String: Any]]) -> [String] {
            v.map { "\($0["request_identifier"]!) \($0["shown"]!) \($0["averted"]!) \($0["intends_cancel"]!)\(($0["default_reason"] as? String).map { " (\($0))" } ?? "")" }
        }
        #expect(outcome(views) == outcome(viewsAgain), "the same views, answers and outcomes for the seed")
        let cancelling = views.filter { $0["intends_cancel"] as? Bool == true }
        let kinds = Dictionary(grouping: cancelling) { $0["shown"] as! String }
        for kind in ["message", "alternate_product", "promotional_offer"] { #expect((kinds[kind]?.count ?? 0) >= 3, "\(kind): \(kinds.mapValues(\.count))") }
        #expect(kinds["alternate_product"]!.allSatisfy { $0["averted"] as? Bool == true })
        #expect(kinds["promotional_offer"]!.allSatisfy { $0["averted"] as? Bool == true })
        let messageAverted = kinds["message"]!.filter { $0["averted"] as? Bool == true }.count
        #expect(messageAverted > 0 && messageAverted < kinds["message"]!.count, "about half of \(kinds["message"]!.count)")
        #expect(views.allSatisfy { $0["intends_cancel"] as? Bool == true || $0["averted"] as? Bool == false }, "browsers do as they would")
        let averted = views.filter { $0["averted"] as? Bool == true }.count
        #expect(summary["averted"] as? Int == averted)
        let treated = views.filter { $0["shown"] as? String != "default" }.count
        #expect(abs((summary["true_effect"] as? Double ?? -1) - Double(averted) / Double(treated)) < 1e-9)

        let p = sim.population, catalog = p.catalog
        for v in cancelling {
            let i = try #require(p.locate(transactionId: v["original_transaction_id"] as! String)).subscriber
            let at = try #require(SimTime.parse(v["at"] as! String))
            let then = p.state(i, at: at + 10 * SimTime.minute)
            guard v["averted"] as? Bool == true else {
                #expect(!then.autoRenew, "not averted: the customer cancels as generated")
                continue
            }
            #expect(then.autoRenew && then.status == 1, "averted: auto-renew stays on")
            #expect(!p.timeline(i).contains { $0.kind == .autoRenewOff && $0.time > at })
            let renewed = p.state(i, at: then.latest.expiresDate + SimTime.minute)
            #expect(renewed.status == 1 && renewed.latest.index == then.latest.index + 1, "it renews")
            switch v["shown"] as? String {
            case "alternate_product":
                #expect(renewed.latest.product != then.latest.product)
                #expect(catalog.products[renewed.latest.product].group == catalog.products[then.latest.product].group)
            case "promotional_offer": #expect(renewed.latest.offer == .promotional)
            default: #expect(renewed.latest.product == then.autoRenewProduct && renewed.latest.offer == .none)
            }
        }
        // What the API serves follows: an averted subscription renews with auto-renew on.
        let served = try #require(cancelling.first { $0["averted"] as? Bool == true && $0["environment"] as? String == "Production" })
        let status = try await sim.get("/inApps/v1/subscriptions/\(served["original_transaction_id"] as! String)")
            .decode(StatusResponse.self)
        let item = try #require((status.data ?? []).flatMap { $0.lastTransactions ?? [] }.first {
            $0.originalTransactionId == served["original_transaction_id"] as? String
        })
        let renewal = try payload(try #require(item.signedRenewalInfo), as: JWSRenewalInfoDecodedPayload.self)
        #expect(item.rawStatus == 1 && renewal.rawAutoRenewStatus == 1)
    }

    @Test("while a view's request is in flight the clock stops just before it, and moves on when the answer is in")
    func clockWaitsForTheAnswer() async throws {
        let gate = DispatchSemaphore(value: 0)
        let (arrivals, arrived) = AsyncStream.makeStream(of: DecodedRealtimeRequestBody.self)
        let receiver = try LoopbackReceiver { request in
            if let r = unverifiedRealtimeRequest(request.body) { arrived.yield(r) }
            gate.wait()
            gate.signal()  // once opened, open for every request
            return LoopbackReceiver.Response(status: 204)
        }
        defer { receiver.stop() }
        var options = SimulatorOptions()
        options.retention.productionURL = receiver.url
        options.retention.timeoutMs = 60_000
        let sim = try await SimHarness.start(subscribers: 1500, options: options)
        defer { Task { try? await sim.stop() } }
        let viewer = CancelPageViewer(service: sim.service)
        let start = sim.now
        let moved = Task { try await sim.post("/_sim/clock?advance=3d") }
        var first: DecodedRealtimeRequestBody?
        for await r in arrivals {
            first = r
            break
        }
        let held = try #require(first).signedDate.rawValue
        #expect(sim.service.clock.now() < held && sim.service.clock.now() >= start)
        let clock = try await sim.get("/_sim/clock", token: "").json as? [String: String]
        #expect(try #require(SimTime.parse(clock?["now"] ?? "")) < held, "GET /_sim/clock shows the held moment")
        gate.signal()
        let answered = try await moved.value
        #expect((answered.json as? [String: String])?["now"] == SimTime.format(start + 3 * SimTime.day))
        #expect(sim.service.clock.now() == start + 3 * SimTime.day)
        let views = try await sim.cancelPageViews()
        #expect(views.contains { $0["at"] as? String == SimTime.format(held) && $0["default_reason"] as? String == "http_status" })
        await viewer.shutdown()
    }
}
