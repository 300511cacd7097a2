import Foundation

/// One arm's long-outcome counts in one allocation period: of the subscribers whose FIRST
/// cancel-page exposure fell in `period`, `decided` have reached their next renewal and `saved`
/// of them were still subscribed past it. The holdout's arm is `ExperimentEstimator.holdout`.
public struct ExperimentCell: Sendable, Equatable {
    public var period: Int
    public var arm: String
    public var decided: Int
    public var saved: Int

    public init(period: Int, arm: String, decided: Int, saved: Int) {
        self.period = period
        self.arm = arm
        self.decided = decided
        self.saved = saved
    }
}

/// An arm's uplift over the holdout on the long outcome.
public struct ArmEstimate: Sendable, Equatable {
    public var arm: String
    /// The arm's totals over every period.
    public var decided: Int
    public var saved: Int
    /// The stratified uplift (the honest one, see `ExperimentEstimator`), its 95 % interval
    /// (clipped to [−1, 1]) and standard error; nil when no period has both the arm and the
    /// holdout decided.
    public var uplift: Double?
    public var low: Double?
    public var high: Double?
    public var standardError: Double?
    /// Pooled over all periods, Newcombe's interval: what one gets by ignoring that the weights
    /// changed. Biased when base rates move between periods while the weights do (Simpson's
    /// paradox); kept to show the difference. Nil when the arm or the holdout has no decided.
    public var naive: UpliftEstimate?
    /// The share of Monte Carlo draws in which this arm's uplift × value per save is the highest
    /// among the arms (0 for an arm without an estimate).
    public var probabilityBest: Double
    /// The number of periods (strata) the stratified estimate used.
    public var periods: Int

    public init(arm: String, decided: Int, saved: Int, uplift: Double?, low: Double?, high: Double?, standardError: Double?,
                naive: UpliftEstimate?, probabilityBest: Double, periods: Int) {
        self.arm = arm
        self.decided = decided
        self.saved = saved
        self.uplift = uplift
        self.low = low
        self.high = high
        self.standardError = standardError
        self.naive = naive
        self.probabilityBest = probabilityBest
        self.periods = periods
    }
}

/// Honest per-arm uplift against the holdout on the LONG outcome (still subscribed past the next
/// renewal) when the arms' weights changed between allocation periods.
///
/// **Why pooling is wrong.** Adaptive allocation gives an arm more traffic in some periods than
/// in others. If the base rate also moves between periods (a season, a price change, a cohort),
/// pooling all periods compares an arm seen mostly in good periods with a holdout seen evenly:
/// the naive difference mixes the treatment effect with the period effect (Simpson's paradox).
///
/// **The estimator (post-stratified by allocation period).** For arm a and period k, with n
/// decided and y saved: d_a,k = p̂_a,k − p̂_0,k, where p̂ = y/n and 0 is the holdout. Then
///
///     τ̂_a = Σ_k W_k · d_a,k,   W_k = N_k / Σ_{k' ∈ K_a} N_k'
///
/// where N_k counts the decided exposures of every arm and the holdout in period k (all cells
/// of that period, also arms not asked about), and K_a is the set of periods in which both the
/// arm and the holdout have decided > 0 (the W are renormalized over K_a).
///
/// **Why it is valid under changing weights.** Within a period the assignment probabilities are
/// fixed, and they were set only from earlier periods' data. So, conditional on the past, the
/// subscribers of period k are randomized between the arm and the holdout with known fixed
/// probabilities, and d_a,k is unbiased for period k's effect τ_a,k (this is why adaptivity
/// across periods does no harm, while adaptivity within a period would). Weighting by N_k, each
/// period's share of the exposed population, makes Σ W_k τ_a,k the average effect over all
/// exposed subscribers, whatever arm they got: the estimand.
///
/// **Variance.** Periods are independent given the allocation, and within a period the arm and
/// the holdout are independent binomials, so
///
///     Var τ̂_a ≈ Σ_k W_k² ( p̃_a,k(1 − p̃_a,k)/(n_a,k + 2) + p̃_0,k(1 − p̃_0,k)/(n_0,k + 2) )
///
/// with the Agresti–Caffo adjustment p̃ = (y + 1)/(n + 2) (one success and one failure added to
/// each group), which keeps the variance positive in periods with 0 % or 100 % saved and gives
/// near-nominal coverage for small groups. The interval is τ̂ ± z·se with z = `UpliftEstimate.z`
/// (95 %), clipped to [−1, 1]. (W_k is treated as fixed; it depends on counts, not outcomes.)
///
/// **Assumptions.** Stable unit treatment (one subscriber's arm does not change another's
/// outcome, and there is one version of each arm); a subscriber belongs to the period of their
/// first exposure and keeps their arm (sticky assignment), so later views do not move them; the
/// holdout share is positive in every period used. The effect may vary by period: the estimand
/// then is the population-weighted average. Periods in which the arm or the holdout has no
/// decided exposure are dropped, which shifts the estimand slightly toward the periods kept
/// (`periods` says how many were used). Only decided subscribers count: if maturing is slower
/// in one arm than another within a period, recent periods are incomplete alike for all.
///
/// **Probability best.** Monte Carlo over `draws` draws: τ_a = τ̂_a + z_a·se_arm,a + z_0·se_hold,a,
/// where se_arm,a² = Σ W_k² p̃_a,k(1 − p̃_a,k)/(n_a,k + 2) and se_hold,a² the holdout's part; z_a is
/// a standard normal drawn per arm and z_0 one drawn per draw and shared by all arms, because
/// every arm is compared with the same holdout (their errors are positively correlated; exact
/// when the arms use the same periods). Value = τ_a × valuePerSave[a] (default 1); the highest
/// value wins the draw, a tie going to the arm first in `arms`.
///
/// Invalid cells (negative counts, saved > decided) are ignored. An arm named `holdout` or
/// given twice in `arms` is reported once / not at all.
public enum ExperimentEstimator {
    /// The arm name of the holdout in cells, tallies and posteriors.
    public static let holdout = "holdout"

    /// One estimate per arm, in the order of `arms`.
    public static func estimate(cells: [ExperimentCell], arms: [String], valuePerSave: [String: Double], draws: Int = 20_000,
                                seed: UInt64) -> [ArmEstimate] {
        let table = CellTable(cells)
        var seen: Set<String> = [holdout]
        let names = arms.filter { seen.insert($0).inserted }
        let parts = names.map { stratified(arm: $0, table: table) }
        let best = probabilityBest(parts: parts, values: names.map { valuePerSave[$0] ?? 1 }, draws: draws, seed: seed)
        return names.indices.map { index in
            let name = names[index], part = parts[index]
            let arm = table.total(name), held = table.total(holdout)
            let naive = UpliftEstimate(treatedSaved: arm.saved, treated: arm.decided, heldOutSaved: held.saved, heldOut: held.decided)
            guard let part else {
                return ArmEstimate(arm: name, decided: arm.decided, saved: arm.saved, uplift: nil, low: nil, high: nil,
                                   standardError: nil, naive: naive, probabilityBest: best[index], periods: 0)
            }
            let se = part.standardError, z = UpliftEstimate.z
            return ArmEstimate(arm: name, decided: arm.decided, saved: arm.saved, uplift: part.uplift,
                               low: max(-1, part.uplift - z * se), high: min(1, part.uplift + z * se), standardError: se,
                               naive: naive, probabilityBest: best[index], periods: part.periods)
        }
    }

    /// The stratified estimate of one arm: τ̂, the two parts of its variance and the periods used.
    struct Stratified: Sendable, Equatable {
        var uplift: Double
        /// Σ W_k² p̃_a,k(1 − p̃_a,k)/(n_a,k + 2): the arm's own part of the variance.
        var armVariance: Double
        /// Σ W_k² p̃_0,k(1 − p̃_0,k)/(n_0,k + 2): the holdout's part.
        var holdoutVariance: Double
        var periods: Int

        var standardError: Double { (armVariance + holdoutVariance).squareRoot() }
    }

    /// τ̂ and its variance parts for `arm` (see the type's documentation); nil without a usable
    /// period.
    private static func stratified(arm: String, table: CellTable) -> Stratified? {
        let usable = table.periods.filter { (table.cell(arm, $0)?.decided ?? 0) > 0 && (table.cell(holdout, $0)?.decided ?? 0) > 0 }
        let population = usable.reduce(0) { $0 + table.decidedInPeriod($1) }
        guard !usable.isEmpty, population > 0 else { return nil }
        var result = Stratified(uplift: 0, armVariance: 0, holdoutVariance: 0, periods: usable.count)
        for period in usable {
            guard let treated = table.cell(arm, period), let held = table.cell(holdout, period) else { continue }
            let weight = Double(table.decidedInPeriod(period)) / Double(population)
            result.uplift += weight * (treated.rate - held.rate)
            result.armVariance += weight * weight * treated.adjustedVariance
            result.holdoutVariance += weight * weight * held.adjustedVariance
        }
        return result
    }

    /// P(best) by the correlated normal draws described in the type's documentation.
    private static func probabilityBest(parts: [Stratified?], values: [Double], draws: Int, seed: UInt64) -> [Double] {
        var wins = [Int](repeating: 0, count: parts.count)
        guard draws > 0, parts.contains(where: { $0 != nil }) else { return wins.map(Double.init) }
        let armSE = parts.map { $0.map { $0.armVariance.squareRoot() } }
        let holdoutSE = parts.map { $0.map { $0.holdoutVariance.squareRoot() } }
        var random = ExperimentRandom(seed: seed)
        for _ in 0..<draws {
            let shared = random.normal()
            var bestIndex: Int?, bestValue = -Double.infinity
            for index in parts.indices {
                guard let part = parts[index], let own = armSE[index], let common = holdoutSE[index] else { continue }
                let value = (part.uplift + random.normal() * own + shared * common) * values[index]
                if bestIndex == nil || value > bestValue { (bestIndex, bestValue) = (index, value) }
            }
            if let bestIndex { wins[bestIndex] += 1 }
        }
        return wins.map { Double($0) / Double(draws) }
    }
}

/// Decided and saved counts summed per (period, arm), and per period over all arms.
private struct CellTable {
    struct Counts: Equatable {
        var decided = 0
        var saved = 0

        /// p̂ = saved / decided.
        var rate: Double { Double(saved) / Double(decided) }

        /// p̃(1 − p̃)/(n + 2) with p̃ = (y + 1)/(n + 2): the Agresti–Caffo variance of p̂.
        var adjustedVariance: Double {
            let n = Double(decided + 2), p = Double(saved + 1) / n
            return p * (1 - p) / n
        }
    }

    private var byArm: [String: [Int: Counts]] = [:]
    private var byPeriod: [Int: Int] = [:]
    /// The periods with at least one valid cell, ascending.
    let periods: [Int]

    init(_ cells: [ExperimentCell]) {
        for cell in cells where cell.decided >= 0 && (0...cell.decided).contains(cell.saved) {
            byArm[cell.arm, default: [:]][cell.period, default: Counts()].decided += cell.decided
            byArm[cell.arm, default: [:]][cell.period, default: Counts()].saved += cell.saved
            byPeriod[cell.period, default: 0] += cell.decided
        }
        periods = byPeriod.keys.sorted()
    }

    func cell(_ arm: String, _ period: Int) -> Counts? { byArm[arm]?[period] }

    func decidedInPeriod(_ period: Int) -> Int { byPeriod[period] ?? 0 }

    func total(_ arm: String) -> Counts {
        (byArm[arm] ?? [:]).values.reduce(into: Counts()) { sum, counts in
            sum.decided += counts.decided
            sum.saved += counts.saved
        }
    }
}
