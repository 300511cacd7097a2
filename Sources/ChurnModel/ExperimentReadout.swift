import Foundation

/// What an experiment's subscribers did in one (allocation period, arm), `holdout` included:
/// each subscriber counted once, in the period and arm of their first exposure.
public struct ExperimentCellCounts: Sendable, Equatable {
    public var period: Int
    public var arm: String
    public var exposed: Int
    /// The decision metric: exposures at least `decision_hours` old, and of them those whose
    /// auto-renew was still on that long after the view.
    public var matured: Int
    public var renewing: Int
    /// The long outcome: decided (saved or lost) and saved (subscribed past the next renewal).
    public var decided: Int
    public var saved: Int
    /// The saved subscribers' renewal prices, by currency (milliunits).
    public var savedPrice: [String: Int64]

    public init(period: Int, arm: String, exposed: Int, matured: Int = 0, renewing: Int = 0, decided: Int = 0, saved: Int = 0,
                savedPrice: [String: Int64] = [:]) {
        (self.period, self.arm, self.exposed, self.matured, self.renewing) = (period, arm, exposed, matured, renewing)
        (self.decided, self.saved, self.savedPrice) = (decided, saved, savedPrice)
    }
}

/// One arm's line of `outcomes --experiment` (the holdout has one too, without an estimate).
public struct ExperimentArmReadout: Sendable, Equatable {
    public var arm: String
    public var retired: Bool
    public var discount: Double
    /// The share of the treated the current allocation gives it (nil: the holdout).
    public var weightNow: Double?
    public var exposed: Int, matured: Int, renewing: Int, decided: Int, saved: Int
    /// The long outcome's uplift against the holdout, stratified by period (nil: the holdout).
    public var estimate: ArmEstimate?
    /// Revenue kept net of the discount, per currency (milliunits): uplift × exposed ×
    /// (1 − discount) × the mean renewal price of the arm's saved subscribers. nil: no estimate.
    public var revenueKept: [String: Int64]?
}

/// An experiment read as a whole: per arm, the sample-ratio check, and the weights' history.
public struct ExperimentReadout: Sendable, Equatable {
    public var arms: [ExperimentArmReadout]
    public var sampleRatio: SampleRatioResult

    /// `intended`: per period, the weights of that allocation (active arms' shares of the
    /// treated); the holdout's fixed share is added here.
    public static func read(_ e: Experiment, cells: [ExperimentCellCounts], intended: [Int: [String: Double]], seed: UInt64) -> ExperimentReadout {
        let names = e.arms.map(\.name)
        let value = Dictionary(uniqueKeysWithValues: e.arms.map { ($0.name, $0.valuePerSave) })
        let estimates = ExperimentEstimator.estimate(
            cells: cells.map { ExperimentCell(period: $0.period, arm: $0.arm, decided: $0.decided, saved: $0.saved) },
            arms: names, valuePerSave: value, seed: seed)
        var lines: [ExperimentArmReadout] = []
        for name in names + [ExperimentAssignment.holdout] {
            let mine = cells.filter { $0.arm == name }
            let arm = e.arms.first { $0.name == name }
            let estimate = estimates.first { $0.arm == name }
            func sum(_ k: KeyPath<ExperimentCellCounts, Int>) -> Int { mine.reduce(0) { $0 + $1[keyPath: k] } }
            let saved = sum(\.saved), exposed = sum(\.exposed)
            var kept: [String: Int64]?
            if let arm, let uplift = estimate?.uplift, saved > 0 {
                let prices = mine.reduce(into: [String: Int64]()) { acc, c in c.savedPrice.forEach { acc[$0.key, default: 0] += $0.value } }
                kept = prices.mapValues { total in Int64((Double(total) / Double(saved) * uplift * Double(exposed) * arm.valuePerSave).rounded()) }
            }
            lines.append(ExperimentArmReadout(
                arm: name, retired: arm?.retired ?? false, discount: arm?.discount ?? 0,
                weightNow: arm == nil ? nil : (arm!.retired ? 0 : e.weights[name] ?? 0),
                exposed: exposed, matured: sum(\.matured), renewing: sum(\.renewing), decided: sum(\.decided), saved: saved,
                estimate: estimate, revenueKept: kept))
        }
        let shares = intended.mapValues { w -> [String: Double] in
            var s = w.mapValues { $0 * (1 - e.holdout) }
            s[ExperimentAssignment.holdout] = e.holdout
            return s
        }
        let srm = SampleRatioCheck.check(
            observed: cells.map { ExposureCount(period: $0.period, arm: $0.arm, count: $0.exposed) }, intended: shares)
        return ExperimentReadout(arms: lines, sampleRatio: srm)
    }
}

/// What `experiments update` decides for one adaptive experiment.
public enum ExperimentUpdate {
    /// Thompson sampling on the decision metric, every period pooled (the holdout's tally is the
    /// baseline its arms are valued against); each arm valued by `1 − discount` per save when
    /// `revenueWeighted`. The seed is the experiment's name and the next period's number, so the
    /// same counts give the same weights.
    public static func decide(_ e: Experiment, cells: [ExperimentCellCounts], minimumMatured: Int, floor: Double, revenueWeighted: Bool) -> AllocationDecision {
        func tally(_ name: String) -> ArmTally {
            let mine = cells.filter { $0.arm == name }
            return ArmTally(arm: name, successes: mine.reduce(0) { $0 + $1.renewing }, trials: mine.reduce(0) { $0 + $1.matured })
        }
        let active = e.activeArms
        let value = Dictionary(uniqueKeysWithValues: active.map { ($0.name, revenueWeighted ? $0.valuePerSave : 1) })
        return ThompsonAllocation.decide(
            arms: active.map { tally($0.name) }, holdout: tally(ExperimentAssignment.holdout), valuePerSave: value,
            current: e.weights.filter { w in active.contains { $0.name == w.key } }, minimumMatured: minimumMatured, floor: floor,
            seed: ExperimentRandom.seed(e.name, e.period + 1))
    }
}
