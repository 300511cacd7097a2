import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// A simulator whose customers' cancel-page views were answered, by subscription (so every view
/// of a subscription shows the same answer), with one of several arms; its viewer's records.
struct CancelPageArmRun {
    static let m1 = "1e0c6f0a-8a55-4c77-9d2e-5b1f4f7a0a01"
    static let m2 = "2e0c6f0a-8a55-4c77-9d2e-5b1f4f7a0a02"
    /// The product every group's alternate-product answer targets unless the subscription is on it.
    static let premiumTarget = "sim.premium.ultimate.monthly"

    enum Arm: Int, CaseIterable {
        case message1, message2, alternate, offer50, offer20, holdout
    }

    /// The arm a subscription's views are answered with.
    static func arm(_ originalTransactionId: String) -> Arm {
        Arm(rawValue: Int((Int64(originalTransactionId) ?? 0) / 1000 % Int64(Arm.allCases.count)))!
    }

    /// The target of an alternate-product answer for a subscription on `product`.
    static func target(of product: Int) -> Int {
        let catalog = Catalog.standard
        return catalog.products(inGroup: catalog.products[product].group).first { $0 != product && $0 != catalog.discontinuedProduct }!
    }

    static func answer(_ body: Data, bundleId: String) -> LoopbackReceiver.Response {
        guard let request = unverifiedRealtimeRequest(body) else { return LoopbackReceiver.Response(status: 400) }
        let catalog = Catalog.standard
        let product = catalog.index(of: request.productId) ?? 0
        func offer(_ id: String) -> LoopbackReceiver.Response {
            let claims = "{\"bid\":\"\(bundleId)\",\"productId\":\"\(request.productId)\",\"offerIdentifier\":\"\(id)\",\"nonce\":\"n\"}"
            let jws = Base64URL.encode("{\"alg\":\"ES256\"}") + "." + Base64URL.encode(claims) + "."
                + Base64URL.encode([UInt8](repeating: 1, count: 64))
            return .json("{\"promotionalOffer\":{\"messageIdentifier\":\"\(m1)\",\"promotionalOfferSignatureV2\":\"\(jws)\"}}")
        }
        switch arm(request.originalTransactionId) {
        case .message1: return .json("{\"message\":{\"messageIdentifier\":\"\(m1)\"}}")
        case .message2: return .json("{\"message\":{\"messageIdentifier\":\"\(m2.uppercased())\"}}")
        case .alternate:
            let id = catalog.products[target(of: product)].id
            return .json("{\"alternateProduct\":{\"messageIdentifier\":\"\(m1)\",\"productId\":\"\(id)\"}}")
        case .offer50: return offer("SAVE50")
        case .offer20: return offer("SAVE20")
        case .holdout: return LoopbackReceiver.Response(status: 204)
        }
    }

    let sim: SimHarness
    let receiver: LoopbackReceiver
    let viewer: CancelPageViewer
    var records: [CancelPageRecord] { viewer.records(of: sim.service.apps[0]) }

    /// `days` of views, every cancellation viewed; the viewer's records stay until ``stop()``.
    static func start(
        _ retention: RetentionOptions, days: Int64, subscribers: Int = 1200, browsePer30Days: Double = 0.1
    ) async throws -> CancelPageArmRun {
        let bundleId = PopulationConfig(subscribers: 1, seed: 1, start: 0).bundleId
        let receiver = try LoopbackReceiver { answer($0.body, bundleId: bundleId) }
        var options = SimulatorOptions()
        options.retention = retention
        options.retention.productionURL = receiver.url
        options.retention.timeoutMs = 30_000
        options.retention.cancelPageShare = 1
        options.retention.browsePer30Days = browsePer30Days
        let sim = try await SimHarness.start(subscribers: subscribers, seed: 11, options: options)
        for m in [m1, m2] {
            #expect(try await sim.messaging("PUT", "message/\(m)", json: ["header": "Stay", "body": "Please"]).status == 200)
        }
        let viewer = CancelPageViewer(service: sim.service)
        sim.service.clock.advance(by: days * SimTime.day)
        await viewer.catchUp(to: sim.service.clock.rawNow())
        return CancelPageArmRun(sim: sim, receiver: receiver, viewer: viewer)
    }

    func stop() async {
        await viewer.shutdown()
        receiver.stop()
        try? await sim.stop()
    }
}

/// Per-answer effects (`--cancel-page-arm-effect`) and offers' terms (`--cancel-page-offer`).
@Suite struct CancelPageArmTests {
    @Test("an answer's own probability decides: offer, then product, then message, then the kind")
    func perAnswerOverride() async throws {
        var retention = RetentionOptions()
        retention.effect = try #require(CancelPageEffect.parse("message=1,alternate_product=1,promotional_offer=1"))
        retention.effect.arms = try CancelPageEffect.parseArms(
            "message:\(CancelPageArmRun.m1.uppercased())=0,offer:SAVE50=1,product:\(CancelPageArmRun.premiumTarget)=1")
        let run = try await CancelPageArmRun.start(retention, days: 45)
        let records = run.records
        await run.stop()

        let p = run.sim.population, catalog = p.catalog
        let premiumTarget = try #require(catalog.index(of: CancelPageArmRun.premiumTarget))
        var seen: [String: Int] = [:]
        for r in records where r.view.intendsCancel {
            let arm = CancelPageArmRun.arm(p.originalTransactionId(Int(r.view.subscriber)))
            let expected: Bool
            switch arm {
            case .message1: expected = false  // message:M1 = 0 beats message = 1
            case .message2: expected = true  // no override: the kind's 1
            case .alternate:
                // product:<target> = 1 beats message:M1 = 0; another target falls to message:M1
                expected = CancelPageArmRun.target(of: r.product) == premiumTarget
                #expect(r.judgement.save?.switchTo == CancelPageArmRun.target(of: r.product))
            case .offer50: expected = true  // offer:SAVE50 = 1 beats message:M1 = 0
            case .offer20: expected = false  // no offer key: message:M1 = 0 beats the kind's 1
            case .holdout: expected = false
            }
            if arm == .offer50 || arm == .offer20 {
                #expect(r.judgement.offerId == (arm == .offer50 ? "SAVE50" : "SAVE20"), "the offer identifier is carried")
            }
            let kind: CancelPageShown = switch arm {
            case .message1, .message2: .message
            case .alternate: .alternateProduct
            case .offer50, .offer20: .promotionalOffer
            case .holdout: .standard
            }
            #expect(r.judgement.shown == kind, "\(arm): \(r.judgement)")
            #expect(r.averted == expected, "\(arm) \(r.judgement)")
            seen["\(arm)\(arm == .alternate ? " \(expected)" : "")", default: 0] += 1
        }
        for key in ["message1", "message2", "alternate true", "alternate false", "offer50", "offer20", "holdout"] {
            #expect(seen[key, default: 0] >= 2, "cancelling views of \(key): \(seen)")
        }
    }

    @Test("--cancel-page-arm-effect, --cancel-page-offer and --offer-effect-by parse, and refuse bad input with a reason")
    func parsing() throws {
        let arms = try CancelPageEffect.parseArms(
            "message:7D1C7C36-5A0E-4A57-9A39-2F1F0AD1C0DE=0.2, offer:SAVE50=0.45,product:sim.premium.lite.monthly=0.3",
            productIds: Set(Catalog.standard.products.map(\.id)))
        #expect(arms == ["message:7d1c7c36-5a0e-4a57-9a39-2f1f0ad1c0de": 0.2, "offer:SAVE50": 0.45, "product:sim.premium.lite.monthly": 0.3])
        #expect(try CancelPageEffect.parseArms("").isEmpty)
        let bad = ["message:nope=0.2", "offer:SAVE50=1.5", "offer:SAVE50", "kind:x=0.1", "offer:=0.1", "offer:A=0.1,offer:A=0.2",
                   "product:com.x.yearly=0.3"]
        for text in bad {
            #expect(throws: CancelPageConfigError.self, "\(text)") {
                try CancelPageEffect.parseArms(text, productIds: Set(Catalog.standard.products.map(\.id)))
            }
        }
        do {
            _ = try CancelPageEffect.parseArms("kind:x=0.1")
            Issue.record("accepted")
        } catch {
            #expect(error.reason.contains("kind:x") && !error.reason.contains("\n"))
        }
        let offers = try CancelPageOfferTerms.parse("SAVE50=0.5x1,SAVE20=0.2x3,xmas=0x2")
        #expect(offers == ["SAVE50": .init(discount: 0.5, periods: 1), "SAVE20": .init(discount: 0.2, periods: 3), "xmas": .init(discount: 0, periods: 2)])
        for text in ["SAVE50=0.5", "SAVE50=1.2x1", "SAVE50=0.5x0", "SAVE50=0.5x1.5", "=0.5x1"] {
            #expect(throws: CancelPageConfigError.self, "\(text)") { try CancelPageOfferTerms.parse(text) }
        }
        #expect(try OfferRedemption.parseEffects("OFFER_A=0.2,OFFER_B=0.35") == ["OFFER_A": 0.2, "OFFER_B": 0.35])
        #expect(throws: CancelPageConfigError.self) { try OfferRedemption.parseEffects("OFFER_A=2") }
    }

    @Test("revenue per save: 1 for a message, the price ratio for a product, 1 - discount for an offer")
    func revenue() {
        var o = RetentionOptions()
        o.offers = ["SAVE50": CancelPageOfferTerms(discount: 0.5, periods: 1)]
        let catalog = Catalog.standard
        let monthly = catalog.index(of: "sim.premium.standard.monthly")!, yearly = catalog.index(of: "sim.premium.standard.yearly")!
        let offer = CancelPageJudgement(
            shown: .promotionalOffer, messageId: "m", save: CancelPageSave(switchTo: yearly, promotional: true, offerId: "SAVE50"))
        let alternate = CancelPageJudgement(shown: .alternateProduct, messageId: "m", save: CancelPageSave(switchTo: yearly, promotional: false))
        let standard = CancelPageJudgement(shown: .standard, messageId: nil, save: nil)
        let full = Double(catalog.price(product: monthly, tier: 1))
        let ratio = Double(catalog.price(product: yearly, tier: 0)) / full
        func rev(_ key: String, _ j: CancelPageJudgement) -> Double? {
            o.revenuePerSave(key: key, shown: j, renewProduct: monthly, renewTier: 1, catalog: catalog)
        }
        #expect(rev("message", standard) == 1 && rev("message:m", offer) == 1)
        #expect(rev("offer:SAVE50", standard) == 0.5, "not shown: an offer on the own product")
        #expect(abs(rev("offer:SAVE50", offer)! - 0.5 * ratio) < 1e-12, "shown: for its product")
        #expect(rev("offer:OTHER", standard) == 1 && rev("promotional_offer", standard) == 1, "not listed: no discount")
        #expect(abs(rev("promotional_offer", offer)! - 0.5 * ratio) < 1e-12)
        #expect(abs(rev("product:sim.premium.standard.yearly", standard)! - ratio) < 1e-12)
        #expect(rev("product:sim.premium.standard.monthly", standard) == 1, "the product it renews into: its own price")
        #expect(abs(rev("alternate_product", alternate)! - ratio) < 1e-12)
        #expect(rev("alternate_product", standard) == nil && rev("product:nope", standard) == nil)
        #expect(CancelPageEffect.answerKey(offer, catalog: catalog) == "offer:SAVE50")
        #expect(CancelPageEffect.answerKey(alternate, catalog: catalog) == "product:sim.premium.standard.yearly")
        #expect(CancelPageEffect.answerKey(standard, catalog: catalog) == "default")
    }
}
