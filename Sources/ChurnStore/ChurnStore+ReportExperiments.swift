import ChurnModel
import Foundation

extension ChurnStore {
    /// The cancel-page experiments of `churnwatch report`: each one started by `asOf` and running
    /// then, or stopped within the `days` days before it; by name. Built from the store's own
    /// reads (`experiments`, `experimentAllocations`, `experimentCounts`) as `outcomes
    /// --experiment` builds its readout, with the same seed, so both show the same figures:
    /// allocations after `asOf` are left out, and the weights "now" are those in force at `asOf`.
    public func reportExperiments(asOf: Date, days: Int) async throws -> [ExperimentReportRow] {
        let since = asOf.addingTimeInterval(-86_400 * Double(max(days, 1)))
        var rows: [ExperimentReportRow] = []
        for r in try await experiments() where r.startedAt <= asOf {
            // Stopped: shown while the stop is in the window (or after asOf: running then).
            let stop = r.running ? r.stoppedAt : (r.stoppedAt ?? .distantPast)
            if let stop, stop <= since { continue }
            let name = r.experiment.name
            let history = try await experimentAllocations(name).filter { $0.at <= asOf }
            var e = r.experiment
            if let current = history.last { (e.period, e.weights) = (current.period, current.weights) }
            let cells = try await experimentCounts(name, asOf: asOf, decisionHours: r.decisionHours)
            let intended = Dictionary(history.map { ($0.period, $0.weights) }, uniquingKeysWith: { $1 })
            let readout = ExperimentReadout.read(e, cells: cells, intended: intended, seed: ExperimentRandom.seed(name, -1))
            let stoppedBy = stop.flatMap { $0 <= asOf ? $0 : nil }
            rows.append(ExperimentReportRow(
                name: name, rule: e.ruleName, allocation: e.allocation, holdout: e.holdout, running: stoppedBy == nil,
                startedAt: r.startedAt, stoppedAt: stoppedBy, decisionHours: r.decisionHours,
                history: history.map { .init(period: $0.period, at: $0.at, weights: $0.weights, reason: $0.reason, by: $0.by) },
                readout: readout))
        }
        return rows
    }
}
