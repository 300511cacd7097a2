import ChurnModel
import ChurnStore
import Foundation

/// `churnwatch outcomes --experiment NAME`: per arm, against the holdout (docs/churn-model.md
/// "Experiments").
enum OutcomesExperiment {
    /// One arm's line of `--json` (the holdout's too, without estimate): the contract's names.
    struct Line: Encodable {
        var bundle_id: String, experiment: String, arm: String, retired: Bool, discount: Double, weight_now: Double?
        var exposed: Int, matured: Int, renewing: Int, renewing_share: Double?, decided: Int, saved: Int, saved_share: Double?
        var uplift: Double?, uplift_low: Double?, uplift_high: Double?, naive_uplift: Double?, naive_low: Double?, naive_high: Double?
        var probability_best: Double?, periods: Int?, revenue_kept: [String: Decimal]?
    }

    /// The experiment-wide line of `--json`: the sample-ratio check and the weights' history.
    struct Summary: Encodable {
        var bundle_id: String, experiment: String, state: String, allocation: String, holdout: Double, period: Int
        var srm_chi_square: Double, srm_df: Int, srm_p_value: Double, srm_flagged: Bool, srm_worst: String?
        var weights_history: [ExperimentAllocationRecord]
    }

    static func read(_ store: ChurnStore, name: String, asOf: Date) async throws -> (ExperimentRecord, ExperimentReadout, [ExperimentAllocationRecord]) {
        guard let r = try await store.experiments(name: name).first else {
            throw ExperimentError("no experiment \(name) in \(store.app) (`churnwatch experiments list` shows them)")
        }
        let history = try await store.experimentAllocations(name)
        let cells = try await store.experimentCounts(name, asOf: asOf, decisionHours: r.decisionHours)
        let intended = Dictionary(uniqueKeysWithValues: history.map { ($0.period, $0.weights) })
        return (r, ExperimentReadout.read(r.experiment, cells: cells, intended: intended, seed: ExperimentRandom.seed(name, -1)), history)
    }

    static func print(_ store: ChurnStore, name: String, asOf: Date, json: Bool) async throws {
        let (r, readout, history) = try await read(store, name: name, asOf: asOf)
        let srm = readout.sampleRatio
        if json {
            Swift.print(try JSONOutput.line(Summary(
                bundle_id: store.app, experiment: name, state: r.running ? "running" : "stopped", allocation: r.experiment.allocation.rawValue,
                holdout: r.experiment.holdout, period: r.experiment.period, srm_chi_square: srm.chiSquare, srm_df: srm.degreesOfFreedom,
                srm_p_value: srm.pValue, srm_flagged: srm.flagged, srm_worst: srm.worst, weights_history: history)))
            for a in readout.arms { Swift.print(try JSONOutput.line(line(a, app: store.app, experiment: name))) }
            return
        }
        Swift.print("experiment \(name) (\(r.running ? "running" : "stopped"), \(r.experiment.allocation.rawValue), holdout \(r.experiment.holdout), period \(r.experiment.period)) as of \(TimeArgument.iso(asOf))")
        for row in table(readout.arms) { Swift.print(row) }
        Swift.print(srm.flagged ? "sample ratio: MISMATCH (p = \(String(format: "%.2g", srm.pValue))): \(srm.worst ?? "") — the assignment is not as intended; do not trust the estimates"
                                : "sample ratio: as intended (chi-square \(String(format: "%.1f", srm.chiSquare)), \(srm.degreesOfFreedom) df, p = \(String(format: "%.3f", srm.pValue)))")
        for a in history {
            let w = a.weights.sorted { $0.key < $1.key }.map { "\($0.key) \(String(format: "%.2f", $0.value))" }.joined(separator: ", ")
            Swift.print("period \(a.period) from \(TimeArgument.iso(a.at)): \(w) (\(a.reason))")
        }
    }

    static func line(_ a: ExperimentArmReadout, app: String, experiment: String) -> Line {
        let e = a.estimate
        return Line(
            bundle_id: app, experiment: experiment, arm: a.arm, retired: a.retired, discount: a.discount, weight_now: a.weightNow,
            exposed: a.exposed, matured: a.matured, renewing: a.renewing, renewing_share: a.matured > 0 ? Double(a.renewing) / Double(a.matured) : nil,
            decided: a.decided, saved: a.saved, saved_share: a.decided > 0 ? Double(a.saved) / Double(a.decided) : nil,
            uplift: e?.uplift, uplift_low: e?.low, uplift_high: e?.high, naive_uplift: e?.naive?.uplift, naive_low: e?.naive?.low,
            naive_high: e?.naive?.high, probability_best: e?.probabilityBest, periods: e?.periods,
            revenue_kept: a.revenueKept?.mapValues { Decimal($0) / 1000 })
    }

    static func table(_ arms: [ExperimentArmReadout]) -> [String] {
        func pct(_ n: Int, _ d: Int) -> String { d > 0 ? String(format: "%.1f%%", Double(n) / Double(d) * 100) : "-" }
        func pad(_ s: String, _ n: Int) -> String { s.padding(toLength: max(n, s.count + 1), withPad: " ", startingAt: 0) }
        var out = [pad("arm", 14) + pad("weight", 8) + pad("exposed", 9) + pad("renewing 24h", 14) + pad("decided", 9) + pad("saved", 8)
                   + pad("uplift [95 % CI]", 30) + pad("P(best)", 9) + "revenue kept"]
        for a in arms {
            var uplift = "-"
            if let e = a.estimate, let u = e.uplift, let l = e.low, let h = e.high { uplift = String(format: "%+.1f pp [%+.1f, %+.1f]", u * 100, l * 100, h * 100) }
            let kept = (a.revenueKept ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key) \(CurrencyAmount.format(milliunits: $0.value, currency: $0.key))" }.joined(separator: ", ")
            out.append(pad(a.arm + (a.retired ? "*" : ""), 14) + pad(a.weightNow.map { String(format: "%.3f", $0) } ?? "-", 8) + pad(String(a.exposed), 9)
                       + pad(pct(a.renewing, a.matured), 14) + pad(String(a.decided), 9) + pad(pct(a.saved, a.decided), 8) + pad(uplift, 30)
                       + pad(a.estimate.map { String(format: "%.2f", $0.probabilityBest) } ?? "-", 9) + (kept.isEmpty ? "-" : kept))
        }
        return out
    }
}
