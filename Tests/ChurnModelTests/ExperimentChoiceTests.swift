import ChurnModel
import Foundation
import Testing

/// The cancel page's choice with an experiment running (issue 50): the fixed holdout from the
/// subscriber's holdout draw, the recorded arm kept whatever the weights, a first exposure
/// drawn under the current weights, a retired arm's subscribers drawn again, arms parsed.
@Suite("experiment choice")
struct ExperimentChoiceTests {
    static let m = "a1111111-1111-4111-8111-111111111111", d = "00000000-0000-4000-8000-00000000d0d0"
    static let arms = [ExperimentArm(name: "a", kind: .message, messageId: m),
                       ExperimentArm(name: "b", kind: .promotionalOffer, messageId: m, offerId: "SAVE50", discount: 0.5)]
    static let experiment = Experiment(name: "exp", ruleName: "everyone", allocation: .adaptive, holdout: 0.2, arms: arms,
                                       period: 3, weights: ["a": 0.25, "b": 0.75])
    static let rules = [RetentionRule(name: "everyone", kind: .message, messageId: d, holdout: 0.5)]
    static let facts = RetentionFacts(productId: "monthly", userLocale: "en-US")

    static func choose(draw: Double, armDraw: Double, recorded: [String: ExperimentAssignment] = [:], experiments: [Experiment] = [experiment]) -> RetentionChoice {
        RetentionChoice.choose(rules: rules, defaults: [RetentionDefault(productId: nil, locale: nil, messageId: d)], facts: facts, draw: draw,
                               experiments: experiments, armDraw: { _ in armDraw }, recorded: recorded)
    }

    @Test("the experiment's holdout replaces the rule's; a first exposure falls where its draw lies under the current weights")
    func holdoutAndFirstDraw() {
        let held = Self.choose(draw: 0.1, armDraw: 0.9)
        #expect(held.arm == .holdout && held.assignment == ExperimentAssignment(arm: "holdout", period: 3) && held.answer == nil)
        // 0.3 is below the rule's own 0.5 holdout, but above the experiment's 0.2: treated.
        let a = Self.choose(draw: 0.3, armDraw: 0.2), b = Self.choose(draw: 0.3, armDraw: 0.3)
        #expect(a.arm == .treated && a.assignment == ExperimentAssignment(arm: "a", period: 3) && a.answer?.kind == .message)
        #expect(b.assignment?.arm == "b" && b.answer?.offerId == "SAVE50" && b.answer?.kind == .promotionalOffer && b.rule?.name == "everyone")
        // Without an experiment the rule answers, with its own holdout.
        #expect(Self.choose(draw: 0.3, armDraw: 0.3, experiments: []).arm == .holdout)
    }

    @Test("a recorded arm is kept whatever the weights and draw; a retired arm's subscriber is drawn again among the active")
    func sticky() {
        let kept = Self.choose(draw: 0.9, armDraw: 0.99, recorded: ["exp": ExperimentAssignment(arm: "a", period: 0)])
        #expect(kept.assignment == ExperimentAssignment(arm: "a", period: 0))
        var retired = Self.experiment
        retired.arms[0].retired = true
        retired.weights = ["b": 1]
        let moved = Self.choose(draw: 0.9, armDraw: 0.01, recorded: ["exp": ExperimentAssignment(arm: "a", period: 0)], experiments: [retired])
        #expect(moved.assignment == ExperimentAssignment(arm: "b", period: 3))
    }

    @Test("arms parse from name:kind:message[:extra][@discount], and their problems are named")
    func parse() {
        let offer = ExperimentArm.parse("half:promotional_offer:\(Self.m):SAVE50@0.5")
        #expect(offer == ExperimentArm(name: "half", kind: .promotionalOffer, messageId: Self.m, offerId: "SAVE50", discount: 0.5))
        #expect(offer?.valuePerSave == 0.5 && offer?.problem == nil)
        #expect(ExperimentArm.parse("yearly:alternate_product:\(Self.m):com.example.yearly")?.alternateProductId == "com.example.yearly")
        #expect(ExperimentArm.parse("x:message:\(Self.m):extra") == nil)
        #expect(ExperimentArm.parse("x:banner:\(Self.m)") == nil)
        #expect(ExperimentArm.parse("holdout:message:\(Self.m)")?.problem != nil)
        #expect(ExperimentArm.parse("x:promotional_offer:\(Self.m)")?.problem != nil)
        #expect(ExperimentArm.parse("x:message:not-a-uuid")?.problem != nil)
        #expect(Experiment.pick(0.999, [("a", 1), ("b", 0), ("c", 1)]) == "c" && Experiment.pick(0.2, [("a", 0), ("b", 2)]) == "b")
    }

    @Test("weights by hand: every active arm named, normalized; kept ones carry on and a new arm gets their mean")
    func weights() throws {
        let active = Self.arms + [ExperimentArm(name: "c", kind: .message, messageId: Self.m)]
        #expect(try ExperimentWeights.resolve(["a": 1, "b": 1, "c": 2], active: active, current: [:]) == ["a": 0.25, "b": 0.25, "c": 0.5])
        #expect(throws: WeightsProblem.self) { try ExperimentWeights.resolve(["a": 1, "b": 1], active: active, current: [:]) }
        #expect(throws: WeightsProblem.self) { try ExperimentWeights.resolve(["a": 1, "b": 1, "c": 1, "z": 1], active: active, current: [:]) }
        let carried = try ExperimentWeights.resolve(nil, active: active, current: ["a": 0.2, "b": 0.6])
        #expect(abs(carried["c"]! - 0.4 / 1.2) < 1e-12 && abs(carried.values.reduce(0, +) - 1) < 1e-12)
        #expect(ExperimentWeights.parse("a=1, b=2") == ["a": 1, "b": 2] && ExperimentWeights.parse("a") == nil)
    }
}
