import Foundation

/// How an experiment's weights move: as given, or nightly by Thompson sampling on the decision
/// metric (docs/churn-model.md "Experiments"). Raw values are `churnwatch.experiments.allocation`.
public enum ExperimentAllocationMode: String, Sendable, Codable, CaseIterable {
    case fixed
    case adaptive
}

/// One arm of a cancel-page experiment: the answer its subscribers are shown.
public struct ExperimentArm: Sendable, Equatable, Codable {
    public var name: String
    public var kind: RetentionAnswerKind
    public var messageId: String
    public var alternateProductId: String?
    public var billingPlanType: String?
    public var offerId: String?
    /// The share of the next renewal's price the answer gives away (a 50 % offer: 0.5).
    public var discount: Double
    /// A retired arm gets no new subscriber; those already in it keep their record.
    public var retired: Bool

    public init(name: String, kind: RetentionAnswerKind, messageId: String, alternateProductId: String? = nil, billingPlanType: String? = nil,
                offerId: String? = nil, discount: Double = 0, retired: Bool = false) {
        (self.name, self.kind, self.messageId, self.alternateProductId) = (name, kind, messageId, alternateProductId)
        (self.billingPlanType, self.offerId, self.discount, self.retired) = (billingPlanType, offerId, discount, retired)
    }

    /// What a save through this arm keeps of a full price: `1 - discount`.
    public var valuePerSave: Double { 1 - discount }

    /// `name:kind:message[:product-or-offer]` with `kind` one of `message`, `alternate_product`
    /// (then the product) or `promotional_offer` (then the offer id), and an optional
    /// `@discount` at the end (`half:promotional_offer:UUID:SAVE50@0.5`). Nil when unreadable.
    public static func parse(_ text: String) -> ExperimentArm? {
        var body = Substring(text), discount = 0.0
        if let at = body.lastIndex(of: "@") {
            guard let d = Double(body[body.index(after: at)...]) else { return nil }
            discount = d
            body = body[..<at]
        }
        let parts = body.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, let kind = RetentionAnswerKind(rawValue: parts[1]) else { return nil }
        var arm = ExperimentArm(name: parts[0], kind: kind, messageId: parts[2], discount: discount)
        let extra = parts.count == 4 ? parts[3] : nil
        switch kind {
        case .message: if extra != nil { return nil }
        case .alternateProduct: arm.alternateProductId = extra
        case .promotionalOffer: arm.offerId = extra
        }
        return arm
    }

    /// The one line saying what is wrong with this arm; nil when it can be used.
    public var problem: String? {
        if name.range(of: "^[a-z0-9][a-z0-9_-]{0,39}$", options: .regularExpression) == nil || name == ExperimentAssignment.holdout {
            return "arm name \(name): 1 to 40 of a-z 0-9 _ - (not \"holdout\")"
        }
        if UUID(uuidString: messageId) == nil { return "arm \(name): \(messageId) is not a message identifier (a UUID)" }
        if !(0..<1).contains(discount) { return "arm \(name): discount \(discount) is not a share from 0 to below 1" }
        switch kind {
        case .message: return nil
        case .alternateProduct: return alternateProductId?.isEmpty ?? true ? "arm \(name): an alternate_product arm needs its product" : nil
        case .promotionalOffer: return offerId?.isEmpty ?? true ? "arm \(name): a promotional_offer arm needs its offer id" : nil
        }
    }

    /// `rule` answering with this arm's answer instead of its own (the rule's conditions stay).
    public func answering(_ rule: RetentionRule) -> RetentionRule {
        var r = rule
        (r.kind, r.messageId, r.alternateProductId, r.billingPlanType, r.offerId) = (kind, messageId, alternateProductId, billingPlanType, offerId)
        return r
    }
}

/// A subscriber's place in an experiment: an arm's name or `holdout`, and the allocation period
/// in force at the first exposure.
public struct ExperimentAssignment: Sendable, Equatable, Codable {
    public static let holdout = "holdout"
    public var arm: String
    public var period: Int

    public init(arm: String, period: Int) { (self.arm, self.period) = (arm, period) }

    public var isHoldout: Bool { arm == Self.holdout }
}

/// A running experiment as `serve` needs it: the rule whose audience it answers, the fixed
/// holdout, the arms and the current allocation.
public struct Experiment: Sendable, Equatable {
    public var name: String
    public var ruleName: String
    public var allocation: ExperimentAllocationMode
    public var holdout: Double
    public var arms: [ExperimentArm]
    /// The current allocation period and its weights (active arms' shares of the treated).
    public var period: Int
    public var weights: [String: Double]

    public init(name: String, ruleName: String, allocation: ExperimentAllocationMode, holdout: Double, arms: [ExperimentArm],
                period: Int, weights: [String: Double]) {
        (self.name, self.ruleName, self.allocation, self.holdout) = (name, ruleName, allocation, holdout)
        (self.arms, self.period, self.weights) = (arms, period, weights)
    }

    public var activeArms: [ExperimentArm] { arms.filter { !$0.retired } }

    /// The subscriber's assignment: the holdout when `holdoutDraw` is below the share (the same
    /// draw as a rule's holdout, so the share never moves a subscriber in or out); else the arm
    /// recorded at their first exposure while it is active; else (a first exposure, or their arm
    /// retired) the arm `armDraw` falls in under the current weights, in the arms' order.
    public func assign(holdoutDraw: Double, armDraw: Double, recorded: ExperimentAssignment?) -> ExperimentAssignment {
        if holdoutDraw < holdout { return ExperimentAssignment(arm: ExperimentAssignment.holdout, period: recorded?.period ?? period) }
        let active = activeArms
        if let recorded, active.contains(where: { $0.name == recorded.arm }) { return recorded }
        return ExperimentAssignment(arm: Self.pick(armDraw, active.map { ($0.name, weights[$0.name] ?? 0) }) ?? active.first?.name ?? "", period: period)
    }

    /// The arm whose cumulative weight interval holds `draw` (weights normalized; nil: no weight).
    public static func pick(_ draw: Double, _ weighted: [(String, Double)]) -> String? {
        let total = weighted.reduce(0) { $0 + max(0, $1.1) }
        guard total > 0 else { return nil }
        var edge = 0.0
        for (name, w) in weighted where w > 0 {
            edge += w / total
            if draw < edge { return name }
        }
        return weighted.last(where: { $0.1 > 0 })?.0
    }

    /// Equal weights over the active arms.
    public static func equalWeights(_ arms: [ExperimentArm]) -> [String: Double] {
        let active = arms.filter { !$0.retired }
        return Dictionary(uniqueKeysWithValues: active.map { ($0.name, 1 / Double(active.count)) })
    }
}

/// The weights of a new allocation period when arms or weights are changed by hand.
public enum ExperimentWeights {
    /// `given` (arm → a positive number, every active arm named, normalized to sum 1); or, nil,
    /// the current weights of the arms still active, a new arm getting their mean, normalized.
    public static func resolve(_ given: [String: Double]?, active: [ExperimentArm], current: [String: Double]) throws(WeightsProblem) -> [String: Double] {
        let names = active.map(\.name)
        if let given {
            if let extra = given.keys.sorted().first(where: { !names.contains($0) }) { throw WeightsProblem("--weights names \(extra), which is not an active arm") }
            if let missing = names.first(where: { given[$0] == nil }) { throw WeightsProblem("--weights must give every active arm a weight: \(missing) has none") }
            if let bad = names.first(where: { !(given[$0]! > 0) || !given[$0]!.isFinite }) { throw WeightsProblem("--weights: \(bad)'s weight is not a positive number") }
            return normalized(given)
        }
        let kept = names.compactMap { n in current[n].map { (n, $0) } }
        let mean = kept.isEmpty ? 1 : kept.map(\.1).reduce(0, +) / Double(kept.count)
        return normalized(Dictionary(uniqueKeysWithValues: names.map { ($0, current[$0] ?? mean) }))
    }

    static func normalized(_ w: [String: Double]) -> [String: Double] {
        let total = w.values.reduce(0, +)
        return w.mapValues { $0 / total }
    }

    /// `a=2,b=1` → ["a": 2, "b": 1]; nil when unreadable.
    public static func parse(_ text: String) -> [String: Double]? {
        var out: [String: Double] = [:]
        for item in text.split(separator: ",") {
            let kv = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard kv.count == 2, let v = Double(kv[1]), out[kv[0]] == nil else { return nil }
            out[kv[0]] = v
        }
        return out.isEmpty ? nil : out
    }
}

/// One line saying what is wrong with weights given by hand.
public struct WeightsProblem: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
