import Foundation
import Testing
@testable import ChurnModel

@Suite("Experiment math: seeded draws, Thompson allocation, the stratified estimator, sample ratio mismatch")
struct ExperimentMathTests {
    /// Sample mean and (unbiased) variance of `n` draws.
    static func moments(_ n: Int, seed: UInt64, _ draw: (inout ExperimentRandom) -> Double) -> (mean: Double, variance: Double) {
        var random = ExperimentRandom(seed: seed)
        var sum = 0.0, squares = 0.0
        for _ in 0..<n {
            let x = draw(&random)
            sum += x
            squares += x * x
        }
        let mean = sum / Double(n)
        return (mean, (squares - Double(n) * mean * mean) / Double(n - 1))
    }

    // MARK: ExperimentRandom

    @Test("the generator is xoshiro256** seeded by SplitMix64 (reference values), reproducible, and unit() stays in (0, 1)")
    func randomIsReproducible() {
        var zero = ExperimentRandom(seed: 0), again = ExperimentRandom(seed: 0), other = ExperimentRandom(seed: 1)
        #expect([zero.next(), zero.next(), zero.next()] == [0x99ec_5f36_cb75_f2b4, 0xbf6e_1f78_4956_452a, 0x1a5f_849d_4933_e6e0])
        var fortyTwo = ExperimentRandom(seed: 42)
        #expect(fortyTwo.next() == 0x1578_0b2e_0c2e_c716)
        let a = (0..<100).map { _ in again.next() }, b = (0..<100).map { _ in other.next() }
        var replay = ExperimentRandom(seed: 0)
        #expect(a == (0..<100).map { _ in replay.next() })
        #expect(a != b)
        var random = ExperimentRandom(seed: 7)
        var low = 1.0, high = 0.0, sum = 0.0
        for _ in 0..<1_000_000 {
            let u = random.unit()
            (low, high, sum) = (min(low, u), max(high, u), sum + u)
        }
        #expect(low > 0 && high < 1 && low < 1e-4 && high > 1 - 1e-4)
        #expect(abs(sum / 1_000_000 - 0.5) < 0.002)
        #expect(ExperimentRandom.seed("spring-offer", 3) == ExperimentRandom.seed("spring-offer", 3))
        #expect(ExperimentRandom.seed("spring-offer", 3) != ExperimentRandom.seed("spring-offer", 4))
        #expect(ExperimentRandom.seed("spring-offer", 3) != ExperimentRandom.seed("summer-offer", 3))
    }

    @Test("normal, gamma (shapes below and above 1) and beta draws have the right mean and variance over 200,000 draws")
    func distributionsHaveTheirMoments() {
        let n = 200_000
        let normal = Self.moments(n, seed: 1) { $0.normal() }
        #expect(abs(normal.mean) < 0.01 && abs(normal.variance - 1) < 0.02)
        for (index, shape) in [0.3, 1, 2.5, 9].enumerated() {
            let g = Self.moments(n, seed: UInt64(10 + index)) { $0.gamma(shape: shape) }
            // Gamma(k, 1): mean k, variance k. Standard errors: √(k/n) and √((2k² + 6k)/n).
            #expect(abs(g.mean - shape) < 5 * (shape / Double(n)).squareRoot(), "gamma(\(shape)) mean \(g.mean)")
            #expect(abs(g.variance - shape) < 5 * ((2 * shape * shape + 6 * shape) / Double(n)).squareRoot(),
                    "gamma(\(shape)) variance \(g.variance)")
        }
        for (a, b) in [(2.0, 5.0), (0.5, 0.5), (31.0, 971.0)] {
            let x = Self.moments(n, seed: 20) { $0.beta(a, b) }
            let mean = a / (a + b), variance = a * b / ((a + b) * (a + b) * (a + b + 1))
            #expect(abs(x.mean - mean) < 5 * (variance / Double(n)).squareRoot(), "beta(\(a), \(b)) mean \(x.mean)")
            #expect(abs(x.variance / variance - 1) < 0.03, "beta(\(a), \(b)) variance \(x.variance) vs \(variance)")
        }
    }

    // MARK: ThompsonAllocation

    static let current = ["a": 0.5, "b": 0.5]

    @Test("no reallocation while an arm has too few matured exposures; the reason names it")
    func waitsForMaturedExposures() {
        let d = ThompsonAllocation.decide(arms: [ArmTally(arm: "a", successes: 90, trials: 300), ArmTally(arm: "b", successes: 10, trials: 37)],
                                          holdout: ArmTally(arm: "holdout", successes: 20, trials: 80), valuePerSave: [:],
                                          current: Self.current, minimumMatured: 100, floor: 0.1, seed: 1)
        #expect(!d.reallocated && d.weights == Self.current)
        #expect(d.reason == "waiting: arm b has 37 of 100 matured exposures")
        #expect(d.posterior.map(\.arm) == ["a", "b", "holdout"])
        #expect(d.posterior[1] == ArmPosterior(arm: "b", alpha: 11, beta: 28, probabilityBest: d.posterior[1].probabilityBest))
        #expect(d.posterior[2].probabilityBest == 0 && d.posterior[2].alpha == 21 && d.posterior[2].beta == 61)
    }

    @Test("a clearly better arm gets most of the weight; every arm keeps the floor; the weights sum to 1")
    func betterArmWinsWithinTheFloor() {
        let arms = [ArmTally(arm: "a", successes: 200, trials: 1000), ArmTally(arm: "b", successes: 300, trials: 1000),
                    ArmTally(arm: "c", successes: 190, trials: 1000)]
        let d = ThompsonAllocation.decide(arms: arms, holdout: nil, valuePerSave: [:], current: ["a": 0.4, "b": 0.3, "c": 0.3],
                                          minimumMatured: 100, floor: 0.05, seed: 2)
        #expect(d.reallocated && d.reason == "reallocated")
        #expect((d.weights["b"] ?? 0) > 0.85)
        #expect(d.weights.values.allSatisfy { $0 >= 0.05 - 1e-12 })
        #expect(abs(d.weights.values.reduce(0, +) - 1) < 1e-12)
        #expect(abs(d.posterior.map(\.probabilityBest).reduce(0, +) - 1) < 1e-9)
        // The floor binds for the losers: P(best) ≈ 0 leaves exactly the floor.
        #expect(abs((d.weights["c"] ?? 0) - 0.05) < 0.01)
    }

    @Test("revenue weighting flips the winner: the arm that saves more but keeps less per save loses")
    func revenueWeightingFlipsTheWinner() {
        let arms = [ArmTally(arm: "discount", successes: 3000, trials: 10_000), ArmTally(arm: "message", successes: 2600, trials: 10_000)]
        let holdout = ArmTally(arm: "holdout", successes: 2000, trials: 10_000)
        func decide(_ value: [String: Double]) -> AllocationDecision {
            ThompsonAllocation.decide(arms: arms, holdout: holdout, valuePerSave: value, current: ["discount": 0.5, "message": 0.5],
                                      minimumMatured: 100, floor: 0.1, seed: 3)
        }
        let bySaves = decide([:]), byRevenue = decide(["discount": 1, "message": 2.5])
        #expect((bySaves.weights["discount"] ?? 0) > 0.85)
        // Uplifts 0.10 and 0.06: worth 0.10 and 0.15 per view.
        #expect((byRevenue.weights["message"] ?? 0) > 0.85)
        #expect(byRevenue.posterior[1].probabilityBest > 0.99)
    }

    @Test("the same seed gives the same decision, another seed other draws; bad input is answered, not crashed on; one arm gets 1")
    func deterministicAndValidated() {
        let close = [ArmTally(arm: "a", successes: 100, trials: 400), ArmTally(arm: "b", successes: 104, trials: 400)]
        func decide(seed: UInt64, floor: Double = 0.1, arms: [ArmTally]? = nil) -> AllocationDecision {
            ThompsonAllocation.decide(arms: arms ?? close, holdout: nil, valuePerSave: [:], current: Self.current,
                                      minimumMatured: 100, floor: floor, draws: 5_000, seed: seed)
        }
        #expect(decide(seed: 9) == decide(seed: 9))
        #expect(decide(seed: 9).weights != decide(seed: 10).weights)
        let bad = decide(seed: 9, floor: 0.6)
        #expect(!bad.reallocated && bad.weights == Self.current && bad.reason.hasPrefix("invalid: floor 0.6"))
        #expect(decide(seed: 9, arms: [ArmTally(arm: "a", successes: 5, trials: 4)]).reason.hasPrefix("invalid:"))
        let one = decide(seed: 9, arms: [ArmTally(arm: "a", successes: 5, trials: 4_000)])
        #expect(one.weights == ["a": 1] && one.reallocated)
        let even = decide(seed: 9, floor: 0.5)
        #expect(even.weights == Self.current)
    }

    // MARK: ExperimentEstimator

    @Test("with one period the stratified estimate is the simple difference, with the Agresti–Caffo standard error")
    func onePeriodIsTheSimpleDifference() throws {
        let cells = [ExperimentCell(period: 0, arm: "a", decided: 400, saved: 140), ExperimentCell(period: 0, arm: "holdout", decided: 100, saved: 25)]
        let e = try #require(ExperimentEstimator.estimate(cells: cells, arms: ["a"], valuePerSave: [:], seed: 1).first)
        #expect(abs((e.uplift ?? .nan) - (0.35 - 0.25)) < 1e-12 && e.periods == 1)
        let pa = 141.0 / 402, p0 = 26.0 / 102
        let se = (pa * (1 - pa) / 402 + p0 * (1 - p0) / 102).squareRoot()
        #expect(abs((e.standardError ?? .nan) - se) < 1e-12)
        #expect(abs((e.low ?? .nan) - (0.1 - UpliftEstimate.z * se)) < 1e-12 && abs((e.high ?? .nan) - (0.1 + UpliftEstimate.z * se)) < 1e-12)
        #expect(e.naive?.uplift == e.uplift && e.probabilityBest == 1 && e.decided == 400 && e.saved == 140)
        let none = ExperimentEstimator.estimate(cells: [cells[0]], arms: ["a"], valuePerSave: [:], seed: 1)
        #expect(none.first?.uplift == nil && none.first?.periods == 0 && none.first?.probabilityBest == 0)
    }

    @Test("Simpson's paradox: the arm's weight grows in the period where everyone saves more; pooling is biased, stratifying is not")
    func stratifiedSurvivesSimpson() throws {
        // The true effect is +0.05 in both periods; base rates 0.20 then 0.60.
        let cells = [ExperimentCell(period: 0, arm: "a", decided: 1000, saved: 250), ExperimentCell(period: 0, arm: "b", decided: 8000, saved: 1600),
                     ExperimentCell(period: 0, arm: "holdout", decided: 1000, saved: 200),
                     ExperimentCell(period: 1, arm: "a", decided: 8000, saved: 5200), ExperimentCell(period: 1, arm: "b", decided: 1000, saved: 600),
                     ExperimentCell(period: 1, arm: "holdout", decided: 1000, saved: 600)]
        let estimates = ExperimentEstimator.estimate(cells: cells, arms: ["a", "b"], valuePerSave: [:], seed: 2)
        let a = try #require(estimates.first), b = try #require(estimates.last)
        #expect(abs((a.uplift ?? .nan) - 0.05) < 1e-12 && abs(b.uplift ?? .nan) < 1e-12)
        #expect((a.low ?? 1) < 0.05 && (a.high ?? 0) > 0.05)
        let naiveA = try #require(a.naive), naiveB = try #require(b.naive)
        #expect(naiveA.uplift > 0.15 && naiveA.low > 0.05)  // 5450/9000 − 800/2000 ≈ 0.21
        #expect(naiveB.uplift < -0.1 && naiveB.high < 0)  // b looks harmful, though it does nothing
        #expect(a.probabilityBest > 0.99 && abs(a.probabilityBest + b.probabilityBest - 1) < 1e-12)
    }

    @Test("400 simulated adaptive experiments: the stratified 95 % interval covers the true effect ≥ 92 % of the time, mean bias < 0.01")
    func coverageUnderAdaptiveWeights() {
        let base = [0.10, 0.30, 0.60, 0.50], effect = ["a": [0.05, 0.03, 0.06, 0.04], "b": [0.0, 0.01, 0.02, 0.0]]
        let truth = effect.mapValues { $0.reduce(0, +) / Double($0.count) }  // equal periods: the population average
        var random = ExperimentRandom(seed: 2024)
        var covered = ["a": 0, "b": 0], error = ["a": 0.0, "b": 0.0], naiveError = ["a": 0.0, "b": 0.0]
        let runs = 400
        for run in 0..<runs {
            var weights = ["a": 0.5, "b": 0.5], cells: [String: [Int: (n: Int, y: Int)]] = [:]
            for period in base.indices {
                for _ in 0..<2_000 {
                    let u = random.unit()
                    let arm = u < 0.1 ? "holdout" : (u - 0.1) / 0.9 < (weights["a"] ?? 0) ? "a" : "b"
                    let rate = base[period] + (effect[arm]?[period] ?? 0)
                    let saved = random.unit() < rate
                    cells[arm, default: [:]][period, default: (0, 0)].n += 1
                    cells[arm, default: [:]][period, default: (0, 0)].y += saved ? 1 : 0
                }
                let tallies = ["a", "b"].map { arm in
                    (cells[arm] ?? [:]).values.reduce(into: ArmTally(arm: arm, successes: 0, trials: 0)) { $0.successes += $1.y; $0.trials += $1.n }
                }
                weights = ThompsonAllocation.decide(arms: tallies, holdout: nil, valuePerSave: [:], current: weights, minimumMatured: 0,
                                                    floor: 0.1, draws: 300, seed: ExperimentRandom.seed("sim\(run)", period + 1)).weights
            }
            let flat = cells.flatMap { arm, periods in periods.map { ExperimentCell(period: $0.key, arm: arm, decided: $0.value.n, saved: $0.value.y) } }
            for e in ExperimentEstimator.estimate(cells: flat, arms: ["a", "b"], valuePerSave: [:], draws: 100, seed: 1) {
                let t = truth[e.arm] ?? .nan
                if let low = e.low, let high = e.high, low <= t, t <= high { covered[e.arm, default: 0] += 1 }
                error[e.arm, default: 0] += (e.uplift ?? .nan) - t
                naiveError[e.arm, default: 0] += (e.naive?.uplift ?? .nan) - t
            }
        }
        for arm in ["a", "b"] {
            #expect(Double(covered[arm] ?? 0) / Double(runs) >= 0.92, "coverage of \(arm): \(covered[arm] ?? 0) of \(runs)")
            #expect(abs((error[arm] ?? .nan) / Double(runs)) < 0.01, "mean bias of \(arm): \((error[arm] ?? .nan) / Double(runs))")
        }
        // Weights followed a, whose traffic grew into the high-base period: pooling flatters it.
        #expect((naiveError["a"] ?? 0) / Double(runs) > 0.015, "naive bias \((naiveError["a"] ?? 0) / Double(runs))")
    }

    // MARK: SampleRatioCheck

    static let shares: [Int: [String: Double]] = [0: ["holdout": 0.1, "a": 0.45, "b": 0.45], 1: ["holdout": 0.1, "a": 0.6, "b": 0.3],
                                                  2: ["holdout": 0.1, "a": 0.81, "b": 0.09], 3: ["holdout": 0.1, "a": 0.5, "b": 0.4]]

    @Test("p-values match the chi-square table (series and continued fraction)")
    func chiSquarePValues() {
        #expect(abs(SampleRatioCheck.pValue(chiSquare: 3.841, degreesOfFreedom: 1) - 0.05) < 1e-3)
        #expect(abs(SampleRatioCheck.pValue(chiSquare: 9.210, degreesOfFreedom: 2) - 0.01) < 1e-3)
        // Against scipy.stats.chi2.sf.
        for (x, df, p) in [(3.841, 1, 0.050013683763956804), (20, 1, 7.744216431044088e-06), (1, 4, 0.9097959895689501),
                           (100, 50, 3.454931382984871e-05), (0.5, 7, 0.9994464813904249)] {
            #expect(abs(SampleRatioCheck.pValue(chiSquare: x, degreesOfFreedom: df) / p - 1) < 1e-9, "x \(x), df \(df)")
        }
        #expect(abs(SampleRatioCheck.pValue(chiSquare: 7, degreesOfFreedom: 2) - exp(-3.5)) < 1e-14)
        #expect(SampleRatioCheck.pValue(chiSquare: 0, degreesOfFreedom: 3) == 1)
        // ln Γ: Γ(½) = √π, Γ(5) = 24, Γ(0.1) = 9.513507698668732, Γ(171) ≈ 170! (near overflow).
        #expect(abs(SampleRatioCheck.logGamma(0.5) - log(Double.pi.squareRoot())) < 1e-13)
        #expect(abs(SampleRatioCheck.logGamma(5) - log(24)) < 1e-13 && abs(SampleRatioCheck.logGamma(0.1) - log(9.513507698668732)) < 1e-13)
        #expect(abs(SampleRatioCheck.logGamma(171) / 706.5730622457874 - 1) < 1e-14)
    }

    @Test("200 simulated experiments drawn at the intended shares raise at most 1 % false alarms")
    func noFalseAlarms() {
        var random = ExperimentRandom(seed: 77)
        var alarms = 0
        for _ in 0..<200 {
            var observed: [ExposureCount] = []
            for (period, size) in [(0, 2_000), (1, 1_500), (2, 3_000), (3, 12)] {
                let arms = (Self.shares[period] ?? [:]).sorted { $0.key < $1.key }
                var counts = [String: Int]()
                for _ in 0..<size {
                    var u = random.unit()
                    let arm = arms.first { u -= $0.value; return u < 0 }?.key ?? arms[arms.count - 1].key
                    counts[arm, default: 0] += 1
                }
                observed += counts.map { ExposureCount(period: period, arm: $0.key, count: $0.value) }
            }
            let result = SampleRatioCheck.check(observed: observed, intended: Self.shares)
            #expect(result.degreesOfFreedom == 8)  // 3 periods × 2, and the small period 3 pooled: 2
            if result.flagged { alarms += 1 }
        }
        #expect(alarms <= 2)
    }

    @Test("a 10 % skew over 2,000 exposures is flagged and located; an exposure where the share is 0 is flagged at once")
    func skewIsFlagged() {
        let skewed = [ExposureCount(period: 0, arm: "a", count: 1_100), ExposureCount(period: 0, arm: "b", count: 900)]
        let result = SampleRatioCheck.check(observed: skewed, intended: [0: ["a": 0.5, "b": 0.5]])
        #expect(result.flagged && abs(result.chiSquare - 20) < 1e-9 && result.degreesOfFreedom == 1 && result.pValue < 1e-4)
        #expect(result.worst == "period 0, arm a: 1100 of 2000 exposures (55.0 %) against 50.0 % intended")
        let exact = SampleRatioCheck.check(observed: [ExposureCount(period: 0, arm: "a", count: 1_000), ExposureCount(period: 0, arm: "b", count: 1_000)],
                                           intended: [0: ["a": 0.5, "b": 0.5]])
        #expect(!exact.flagged && exact.chiSquare == 0 && exact.pValue == 1)
        let retired = SampleRatioCheck.check(observed: skewed.map { ExposureCount(period: 1, arm: $0.arm, count: $0.count) } +
                                             [ExposureCount(period: 1, arm: "c", count: 3)],
                                             intended: [1: ["a": 0.55, "b": 0.45, "c": 0]])
        #expect(retired.flagged && retired.pValue == 0 && retired.worst?.contains("arm c: 3 exposures") == true)
    }
}
