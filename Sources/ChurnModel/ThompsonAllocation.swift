import Foundation

/// An arm's matured decision-metric counts: of `trials` cancel-page views old enough to be
/// judged (24 h), `successes` were still renewing.
public struct ArmTally: Sendable, Equatable, Codable {
    public var arm: String
    public var successes: Int
    public var trials: Int

    public init(arm: String, successes: Int, trials: Int) {
        self.arm = arm
        self.successes = successes
        self.trials = trials
    }

    /// Trials that were not successes.
    public var failures: Int { trials - successes }
}

/// An arm's posterior for its success rate θ, Beta(alpha, beta), and how often it was the most
/// valuable arm among the posterior draws.
public struct ArmPosterior: Sendable, Equatable, Codable {
    public var arm: String
    public var alpha: Double
    public var beta: Double
    public var probabilityBest: Double

    public init(arm: String, alpha: Double, beta: Double, probabilityBest: Double) {
        self.arm = arm
        self.alpha = alpha
        self.beta = beta
        self.probabilityBest = probabilityBest
    }

    /// The posterior mean α/(α + β).
    public var mean: Double { alpha / (alpha + beta) }
}

/// What one nightly allocation decided.
public struct AllocationDecision: Sendable, Equatable {
    /// The new weights (summing to 1) over the arms passed; equal to `current` when not
    /// reallocated. The holdout's share is outside these weights and never changes.
    public var weights: [String: Double]
    /// One per arm in the given order, then the holdout's (arm `"holdout"`, probabilityBest 0)
    /// when a holdout tally was passed. Empty when the input was invalid.
    public var posterior: [ArmPosterior]
    public var reallocated: Bool
    /// One line: `"reallocated"`, `"waiting: …"`, `"one arm: weight 1"` or `"invalid: …"`.
    public var reason: String

    public init(weights: [String: Double], posterior: [ArmPosterior], reallocated: Bool, reason: String) {
        self.weights = weights
        self.posterior = posterior
        self.reallocated = reallocated
        self.reason = reason
    }
}

/// Adaptive allocation between an experiment's arms by Thompson sampling (Thompson 1933), on the
/// decision metric (still renewing 24 h after the view), run once per allocation period.
///
/// **Model.** Each arm's success rate θ_a gets a uniform Beta(1, 1) prior; after s successes in
/// n matured trials its posterior is Beta(1 + s, 1 + n − s) (the Beta is conjugate to the
/// binomial). Posteriors of different arms are independent.
///
/// **Value.** What we want is not the most renewals but the most *extra* revenue over showing
/// the default. In one joint draw from the posteriors, arm a's value is
/// (θ_a − θ_0) × valuePerSave[a] when a holdout with trials is given (θ_0 drawn once per draw
/// from the holdout's posterior and shared by every arm, so its noise is common), otherwise
/// θ_a × valuePerSave[a]. A missing `valuePerSave` entry counts as 1. With equal values the
/// holdout cannot change which arm is best; with different values it matters: an arm that saves
/// more but earns less per save can lose.
///
/// **Probability best.** P(best)_a is estimated as the share of `draws` joint draws in which a
/// has the highest value (a tie goes to the arm first in the given order). The Monte Carlo error
/// is at most ½/√draws (≈ 0.0035 for 20,000 draws).
///
/// **Weights.** Thompson sampling shows each arm with the probability that it is best; here that
/// is done in batches (one weight per allocation period) and shrunk toward uniform so no arm
/// starves: w_a = floor + (1 − k·floor)·P(best)_a for k arms. Every w_a ≥ floor and, since the
/// P(best) sum to 1, the weights sum to k·floor + (1 − k·floor) = 1 (the largest weight absorbs
/// the floating-point rest so the sum is 1 to the last bit that arithmetic allows). The floor
/// keeps data flowing to every arm, so a lucky early lead can be overturned and the estimator
/// (`ExperimentEstimator`) has both arms in every period.
///
/// **When it does not reallocate** (weights == current, reallocated false):
/// - while any arm has fewer than `minimumMatured` trials (the holdout is not counted: its share
///   is fixed); the reason names the arm with the fewest;
/// - on invalid input, which is answered with an `"invalid: …"` reason rather than a crash
///   (this runs unattended every night): no arms, an empty, duplicated or `"holdout"` arm name,
///   counts with successes outside 0...trials, `floor` outside [0, 1/k], a value per save that
///   is not positive and finite, or `draws` < 1.
///
/// With one arm the weight is 1 (reallocated when `current` said otherwise).
///
/// The posteriors and P(best) are reported also while waiting (they describe the data so far).
/// Pure: the draws come from `ExperimentRandom(seed:)`, so equal inputs give equal decisions;
/// seed with `ExperimentRandom.seed(experimentName, allocationNumber)`.
public enum ThompsonAllocation {
    public static func decide(arms: [ArmTally], holdout: ArmTally?, valuePerSave: [String: Double], current: [String: Double],
                              minimumMatured: Int, floor: Double, draws: Int = 20_000, seed: UInt64) -> AllocationDecision {
        if let problem = problem(arms: arms, holdout: holdout, valuePerSave: valuePerSave, floor: floor, draws: draws) {
            return AllocationDecision(weights: current, posterior: [], reallocated: false, reason: "invalid: \(problem)")
        }
        let best = probabilityBest(arms: arms, holdout: holdout, valuePerSave: valuePerSave, draws: draws, seed: seed)
        var posterior = zip(arms, best).map { tally, p in
            ArmPosterior(arm: tally.arm, alpha: Double(1 + tally.successes), beta: Double(1 + tally.failures), probabilityBest: p)
        }
        if let holdout {
            posterior.append(ArmPosterior(arm: ExperimentEstimator.holdout, alpha: Double(1 + holdout.successes),
                                          beta: Double(1 + holdout.failures), probabilityBest: 0))
        }
        if arms.count == 1 {
            let weights = [arms[0].arm: 1.0]
            return AllocationDecision(weights: weights, posterior: posterior, reallocated: weights != current, reason: "one arm: weight 1")
        }
        if let fewest = arms.enumerated().min(by: { ($0.element.trials, $0.offset) < ($1.element.trials, $1.offset) })?.element,
           fewest.trials < minimumMatured {
            return AllocationDecision(weights: current, posterior: posterior, reallocated: false,
                                      reason: "waiting: arm \(fewest.arm) has \(fewest.trials) of \(minimumMatured) matured exposures")
        }
        let weights = flooredWeights(arms: arms.map(\.arm), probabilityBest: best, floor: floor)
        return AllocationDecision(weights: weights, posterior: posterior, reallocated: true, reason: "reallocated")
    }

    /// w_a = floor + (1 − k·floor)·p_a, the largest weight taking the floating-point rest so the
    /// weights sum to 1.
    public static func flooredWeights(arms: [String], probabilityBest: [Double], floor: Double) -> [String: Double] {
        let k = Double(arms.count)
        var values = probabilityBest.map { floor + (1 - k * floor) * $0 }
        if let largest = values.indices.max(by: { values[$0] < values[$1] }) {
            let others = values.indices.filter { $0 != largest }.reduce(0.0) { $0 + values[$1] }
            values[largest] = 1 - others
        }
        return Dictionary(zip(arms, values), uniquingKeysWith: { first, _ in first })
    }

    /// The share of joint posterior draws in which each arm has the highest value (see the
    /// type's documentation), in the arms' order.
    static func probabilityBest(arms: [ArmTally], holdout: ArmTally?, valuePerSave: [String: Double],
                                draws: Int, seed: UInt64) -> [Double] {
        var random = ExperimentRandom(seed: seed)
        let alphas = arms.map { Double(1 + $0.successes) }, betas = arms.map { Double(1 + $0.failures) }
        let values = arms.map { valuePerSave[$0.arm] ?? 1 }
        let baseline = holdout.flatMap { $0.trials > 0 ? (Double(1 + $0.successes), Double(1 + $0.failures)) : nil }
        var wins = [Int](repeating: 0, count: arms.count)
        for _ in 0..<draws {
            let theta0 = baseline.map { random.beta($0.0, $0.1) } ?? 0
            var bestIndex = 0, bestValue = -Double.infinity
            for index in arms.indices {
                let value = (random.beta(alphas[index], betas[index]) - theta0) * values[index]
                if value > bestValue { (bestIndex, bestValue) = (index, value) }
            }
            wins[bestIndex] += 1
        }
        return wins.map { Double($0) / Double(draws) }
    }

    /// What is wrong with the input, in a few words; nil when it can be used.
    static func problem(arms: [ArmTally], holdout: ArmTally?, valuePerSave: [String: Double], floor: Double, draws: Int) -> String? {
        guard !arms.isEmpty else { return "no arms" }
        var seen = Set<String>()
        for tally in arms {
            if tally.arm.isEmpty { return "an arm has an empty name" }
            if tally.arm == ExperimentEstimator.holdout { return "an arm is named \(ExperimentEstimator.holdout)" }
            if !seen.insert(tally.arm).inserted { return "arm \(tally.arm) is given twice" }
            if tally.trials < 0 || !(0...tally.trials).contains(tally.successes) {
                return "arm \(tally.arm) has \(tally.successes) successes of \(tally.trials) trials"
            }
            if let value = valuePerSave[tally.arm], !(value > 0 && value.isFinite) {
                return "arm \(tally.arm) has a value per save of \(value); it must be positive"
            }
        }
        if let holdout, holdout.trials < 0 || !(0...holdout.trials).contains(holdout.successes) {
            return "the holdout has \(holdout.successes) successes of \(holdout.trials) trials"
        }
        let k = Double(arms.count)
        guard floor >= 0, floor * k <= 1 + 1e-12 else {
            return "floor \(floor) is outside [0, 1/\(arms.count)]"
        }
        guard draws >= 1 else { return "draws must be at least 1, not \(draws)" }
        return nil
    }
}
