import Foundation

/// First exposures counted in one (allocation period, arm); the holdout's arm is
/// `ExperimentEstimator.holdout`.
public struct ExposureCount: Sendable, Equatable {
    public var period: Int
    public var arm: String
    public var count: Int

    public init(period: Int, arm: String, count: Int) {
        self.period = period
        self.arm = arm
        self.count = count
    }
}

/// The sample ratio mismatch test's answer.
public struct SampleRatioResult: Sendable, Equatable {
    /// Pearson's X² summed over the strata; +∞ when an arm with intended share 0 was exposed.
    public var chiSquare: Double
    public var degreesOfFreedom: Int
    public var pValue: Double
    /// pValue < `SampleRatioCheck.threshold`.
    public var flagged: Bool
    /// The (period, arm) furthest from its share (largest |O − E|/√E, or an exposure where the
    /// share is 0), in one line; nil without exposures.
    public var worst: String?

    public init(chiSquare: Double, degreesOfFreedom: Int, pValue: Double, flagged: Bool, worst: String?) {
        self.chiSquare = chiSquare
        self.degreesOfFreedom = degreesOfFreedom
        self.pValue = pValue
        self.flagged = flagged
        self.worst = worst
    }
}

/// Sample ratio mismatch (SRM): are the first exposures split between the arms and the holdout as
/// intended? When they are not, the assignment is broken (a bug in the draw, a crash in one arm
/// before logging, bots, caching) and no estimate from the experiment can be trusted.
///
/// **Test.** Within period k, with N_k first exposures and intended shares s_a,k, the counts are
/// multinomial(N_k; s_k) if assignment works. Pearson's statistic Σ_a (O_a,k − E_a,k)²/E_a,k with
/// E_a,k = N_k·s_a,k is then approximately χ² with (arms with s > 0) − 1 degrees of freedom, and
/// the periods are independent, so the statistics and degrees of freedom add up. The p-value is
/// P(χ²_df ≥ X²) = Q(df/2, X²/2), Q the regularized upper incomplete gamma function. The flag is
/// raised below p = 0.001, a strict threshold because the check runs every night on every
/// experiment (false alarms add up) and real SRMs are usually glaring.
///
/// **Shares of 0 and missing shares.** An exposure in an arm whose intended share is 0 (or that
/// the period's shares do not name, or in a period without intended shares) cannot happen by
/// chance: it is flagged with X² = +∞ and p = 0 (the other cells still give the degrees of
/// freedom, and `worst` names the first such exposure). Shares are normalized to sum to 1 in
/// each period (negative or non-finite ones count as 0); periods without exposures add nothing.
///
/// **Small counts.** The χ² approximation wants expected counts of about 5 or more. A period
/// whose smallest expected count (over arms with s > 0) is below `minimumExpected` is not tested
/// alone: all such periods are pooled into one stratum, observed and expected counts summed per
/// arm (E_a = Σ_k N_k·s_a,k), with (arms with any E > 0) − 1 degrees of freedom. Under correct
/// assignment the pooled counts are a sum of multinomials with different shares, whose
/// covariance is that of one multinomial at the averaged shares minus Σ_k N_k (s_k − s̄)(s_k − s̄)ᵀ,
/// i.e. smaller: the pooled statistic is conservative (fewer false alarms, a little less power).
/// When even the pool has an expected count below 5 it is kept anyway: with so few exposures
/// the test has little power but the approximation errs by little at these sizes.
public enum SampleRatioCheck {
    /// p-values below this are flagged.
    public static let threshold = 0.001
    /// Periods with an expected count below this are pooled (see the type's documentation).
    public static let minimumExpected = 5.0

    /// - Parameters:
    ///   - observed: first exposures per (period, arm incl. "holdout"); repeated keys add up,
    ///     negative counts are ignored.
    ///   - intended: per period, arm → share (summing to 1 per period).
    public static func check(observed: [ExposureCount], intended: [Int: [String: Double]]) -> SampleRatioResult {
        var counts: [Int: [String: Int]] = [:]
        for cell in observed where cell.count > 0 { counts[cell.period, default: [:]][cell.arm, default: 0] += cell.count }
        var chiSquare = 0.0, df = 0
        var worst: (score: Double, line: String)?, impossible: String?
        var pooledObserved: [String: Double] = [:], pooledExpected: [String: Double] = [:]
        for period in counts.keys.sorted() {
            let observedHere = counts[period] ?? [:]
            let total = Double(observedHere.values.reduce(0, +))
            let shares = normalized(intended[period] ?? [:])
            if impossible == nil, let arm = observedHere.keys.sorted().first(where: { (shares[$0] ?? 0) == 0 }) {
                impossible = "period \(period), arm \(arm): \(observedHere[arm] ?? 0) exposures but an intended share of 0"
            }
            let expected = shares.mapValues { $0 * total }
            for (arm, e) in expected.sorted(by: { $0.key < $1.key }) {
                let o = Double(observedHere[arm] ?? 0), score = abs(o - e) / e.squareRoot()
                if worst.map({ score > $0.score }) ?? true {
                    worst = (score, Self.describe(period: period, arm: arm, observed: o, total: total, share: e / total))
                }
            }
            if (expected.values.min() ?? 0) < minimumExpected {
                for (arm, e) in expected {
                    pooledExpected[arm, default: 0] += e
                    pooledObserved[arm, default: 0] += Double(observedHere[arm] ?? 0)
                }
            } else {
                chiSquare += pearson(observed: expected.keys.map { Double(observedHere[$0] ?? 0) }, expected: Array(expected.values))
                df += expected.count - 1
            }
        }
        if !pooledExpected.isEmpty {
            let arms = Array(pooledExpected.keys)
            chiSquare += pearson(observed: arms.map { pooledObserved[$0] ?? 0 }, expected: arms.map { pooledExpected[$0] ?? 0 })
            df += arms.count - 1
        }
        if let impossible {
            return SampleRatioResult(chiSquare: .infinity, degreesOfFreedom: df, pValue: 0, flagged: true, worst: impossible)
        }
        let p = pValue(chiSquare: chiSquare, degreesOfFreedom: df)
        return SampleRatioResult(chiSquare: chiSquare, degreesOfFreedom: df, pValue: p, flagged: p < threshold, worst: worst?.line)
    }

    /// P(χ²_df ≥ x) = Q(df/2, x/2); 1 for df ≤ 0 or x ≤ 0, 0 for x = +∞.
    public static func pValue(chiSquare x: Double, degreesOfFreedom df: Int) -> Double {
        guard df > 0, x > 0 else { return 1 }
        guard x.isFinite else { return 0 }
        return regularizedUpperGamma(Double(df) / 2, x / 2)
    }

    /// Q(a, x) = Γ(a, x)/Γ(a) = 1 − P(a, x), for a > 0, x ≥ 0.
    ///
    /// For x < a + 1 the series P(a, x) = e^(−x) x^a / Γ(a) · Σ_n x^n / (a(a+1)…(a+n)) converges
    /// fast and Q = 1 − P; otherwise the continued fraction
    /// Q(a, x) = e^(−x) x^a / Γ(a) · 1/(x + 1 − a − 1·(1 − a)/(x + 3 − a − 2·(2 − a)/(x + 5 − a − …)))
    /// does, evaluated by the modified Lentz method (Numerical Recipes §6.2). The prefactor is
    /// computed in logs with `logGamma`, so large a and x do not overflow. Relative accuracy ~1e-13.
    public static func regularizedUpperGamma(_ a: Double, _ x: Double) -> Double {
        precondition(a > 0, "Q(a, x) needs a > 0")
        guard x > 0 else { return 1 }
        let logPrefactor = -x + a * log(x) - logGamma(a)
        if x < a + 1 {
            var term = 1 / a, sum = term, denominator = a
            for _ in 0..<1_000 {
                denominator += 1
                term *= x / denominator
                sum += term
                if abs(term) < abs(sum) * 1e-16 { break }
            }
            return max(0, 1 - sum * exp(logPrefactor))
        }
        let tiny = 1e-300
        var b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d
        for i in 1...1_000 {
            let an = -Double(i) * (Double(i) - a)
            b += 2
            d = an * d + b
            if abs(d) < tiny { d = tiny }
            c = b + an / c
            if abs(c) < tiny { c = tiny }
            d = 1 / d
            let delta = d * c
            h *= delta
            if abs(delta - 1) < 1e-16 { break }
        }
        return min(1, exp(logPrefactor) * h)
    }

    /// ln Γ(x) for x > 0 by the Lanczos approximation (g = 7, nine coefficients; relative error
    /// below 1e-15): Γ(x + 1) ≈ √(2π) (x + g + ½)^(x + ½) e^(−(x + g + ½)) A_g(x), with
    /// Γ(x) = Γ(x + 1)/x folded in by shifting x down by one. For x < ½ the reflection
    /// Γ(x)Γ(1 − x) = π / sin(πx) is used. (Not the C library's `lgamma`, which writes the global
    /// `signgam` and so is not safe to call from concurrent tasks.)
    public static func logGamma(_ x: Double) -> Double {
        precondition(x > 0, "logGamma needs x > 0")
        if x < 0.5 { return log(Double.pi / sin(Double.pi * x)) - logGamma(1 - x) }
        let coefficients = [0.999_999_999_999_809_93, 676.520_368_121_885_1, -1_259.139_216_722_402_8, 771.323_428_777_653_13,
                            -176.615_029_162_140_59, 12.507_343_278_686_905, -0.138_571_095_265_720_12,
                            9.984_369_578_019_571_6e-6, 1.505_632_735_149_311_6e-7]
        let shifted = x - 1, t = shifted + 7.5
        var series = coefficients[0]
        for index in 1..<coefficients.count { series += coefficients[index] / (shifted + Double(index)) }
        return 0.5 * log(2 * Double.pi) + (shifted + 0.5) * log(t) - t + log(series)
    }

    /// Σ (O − E)²/E over cells with E > 0.
    private static func pearson(observed: [Double], expected: [Double]) -> Double {
        zip(observed, expected).reduce(0) { sum, pair in
            pair.1 > 0 ? sum + (pair.0 - pair.1) * (pair.0 - pair.1) / pair.1 : sum
        }
    }

    /// Positive finite shares scaled to sum to 1; the others dropped.
    private static func normalized(_ shares: [String: Double]) -> [String: Double] {
        let kept = shares.filter { $0.value > 0 && $0.value.isFinite }
        let sum = kept.values.reduce(0, +)
        return sum > 0 ? kept.mapValues { $0 / sum } : [:]
    }

    private static func describe(period: Int, arm: String, observed: Double, total: Double, share: Double) -> String {
        func percent(_ x: Double) -> String { String(format: "%.1f %%", x * 100) }
        return "period \(period), arm \(arm): \(Int(observed)) of \(Int(total)) exposures (\(percent(observed / total))) against \(percent(share)) intended"
    }
}
