import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

/// `experiments update`: the nightly reallocation (cron, after the run whose notifications say
/// who turned auto-renew off). Each running adaptive experiment whose allocation is at least
/// its cadence old (less an hour, for cron's drift) is decided by Thompson sampling on the
/// matured decision metric; a new period is recorded only when weights move.
struct ExperimentUpdateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update", abstract: "Reallocate the running adaptive experiments that are due (cron, nightly after the run).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @Option(name: .customLong("name"), help: "Only this experiment.") var name: String?
    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment metrics mature by (default: now).", valueName: "time")) var asOf: String?
    @Flag(name: .customLong("force"), help: "Decide even when the cadence has not passed.") var force = false

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let store = try await app.singleStore(global)
            let running = try await store.experiments(runningOnly: true, name: name)
            if let name, running.isEmpty { throw ExperimentError("no running experiment \(name) in \(store.app) (`churnwatch experiments list` shows them)") }
            for r in running { print(try await Self.update(r, store: store, at: at, force: force)) }
        }
    }

    /// One experiment's update, as one line.
    static func update(_ r: ExperimentRecord, store: ChurnStore, at: Date, force: Bool) async throws -> String {
        let e = r.experiment
        guard e.allocation == .adaptive else { return "\(e.name): fixed weights, nothing to do" }
        let due = r.periodAt.addingTimeInterval(Double(r.cadenceHours) * 3600 - 3600)
        guard force || at >= due else { return "\(e.name): not due until \(TimeArgument.iso(due)) (period \(e.period) began \(TimeArgument.iso(r.periodAt)))" }
        let cells = try await store.experimentCounts(e.name, asOf: at, decisionHours: r.decisionHours)
        let d = ExperimentUpdate.decide(e, cells: cells, minimumMatured: r.minimumMatured, floor: r.floor, revenueWeighted: r.revenueWeighted)
        guard d.reallocated else { return "\(e.name): weights kept (\(d.reason))" }
        let written = try await store.experimentAllocate(e.name, after: e.period, at: at, by: "experiments update", reason: d.reason,
                                                         weights: d.weights, previous: e.weights, posterior: d.posterior)
        guard written else { return "\(e.name): another update came first; nothing written" }
        let w = e.activeArms.map { "\($0.name) \(String(format: "%.3f", d.weights[$0.name] ?? 0))" }.joined(separator: ", ")
        return "\(e.name): period \(e.period + 1), weights \(w)"
    }
}
