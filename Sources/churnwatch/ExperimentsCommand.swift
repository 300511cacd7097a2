import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

/// `churnwatch experiments`: cancel-page experiments with several arms (docs/contracts.md
/// "Experiments"). One place for them, apart from `messages rules`: an experiment has a life of
/// its own (arms retired and added, weights over time, its estimates, its stop) that a rule,
/// which is one fixed answer, does not; it borrows a rule's audience and gives it back at stop.
struct ExperimentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "experiments",
        abstract: "Experiments with several arms on a cancel-page rule's audience: add, list, show, set, update, stop.",
        discussion: """
            An experiment answers the audience of one cancel-page rule (who it matches) with one of its arms instead of \
            the rule's answer, holding a fixed share out (shown the default). Each subscriber's arm is drawn once and \
            kept. Weights are fixed, or moved by `experiments update` (cron, after the nightly run) by Thompson sampling \
            on a metric known in a day: auto-renew still on 24 hours after the view. Read it with \
            `churnwatch outcomes --experiment NAME`.

            Exit codes: 0; 78 a bad value, an unknown rule, experiment or arm; 64 a malformed command line; 69 database unreachable.
            """,
        subcommands: [ExperimentAdd.self, ExperimentList.self, ExperimentShow.self, ExperimentSet.self, ExperimentUpdateCommand.self, ExperimentStop.self])

    /// The arms of `--arm` options, each checked.
    static func arms(_ specs: [String]) throws -> [ExperimentArm] {
        try specs.map { spec in
            guard let arm = ExperimentArm.parse(spec) else {
                throw CLIError.configuration("--arm \(spec.prefix(80)): name:kind:message[:product-or-offer][@discount], e.g. half:promotional_offer:UUID:SAVE50@0.5")
            }
            if let problem = arm.problem { throw CLIError.configuration(problem) }
            return arm
        }
    }

    static func weights(_ text: String?) throws -> [String: Double]? {
        guard let text else { return nil }
        guard let w = ExperimentWeights.parse(text) else { throw CLIError.configuration("--weights \(text.prefix(80)): arm=number,... e.g. a=1,b=1,c=2") }
        return w
    }

    static func by() -> String { ProcessInfo.processInfo.environment["USER"].map { "cli:\($0)" } ?? "cli" }
}

struct ExperimentAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Start an experiment on a rule's audience; every arm's message must be APPROVED at Apple.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Argument(help: "The experiment's name (kept after stop).") var name: String
    @Option(name: .customLong("rule"), help: "The cancel-page rule whose audience it answers.") var rule: String
    @Option(name: .customLong("arm"), help: ArgumentHelp("An arm (repeat, 2 to 8): name:kind:message[:product-or-offer][@discount].", valueName: "spec"))
    var arm: [String] = []
    @Option(name: .customLong("holdout"), help: ArgumentHelp("Share held out (shown the default), above 0 and below 1; fixed.", valueName: "share")) var holdout: Double
    @Option(name: .customLong("allocation"), help: "fixed or adaptive (default adaptive).") var allocation = "adaptive"
    @Option(name: .customLong("weights"), help: ArgumentHelp("Starting weights (default equal).", valueName: "a=1,b=1")) var weights: String?
    @Option(name: .customLong("min-matured"), help: "Adaptive: matured exposures every arm needs before weights move (default 100).") var minMatured = 100
    @Option(name: .customLong("floor"), help: "Adaptive: the least weight an arm keeps (default 0.05).") var floor = 0.05
    @Flag(name: .customLong("no-revenue-weighting"), help: "Adaptive: value arms by saves alone, not saves × (1 − discount).") var noRevenue = false
    @Option(name: .customLong("decision-hours"), help: "How long after a view its decision metric matures (default 24).") var decisionHours = 24
    @Option(name: .customLong("cadence-hours"), help: "Adaptive: the least time between two allocations (default 24).") var cadenceHours = 24
    @Option(name: .customLong("as-of"), help: ArgumentHelp("The start's moment (default: now).", valueName: "time")) var asOf: String?

    func record() throws -> ExperimentRecord {
        let arms = try ExperimentsCommand.arms(arm)
        guard (2...8).contains(arms.count) else { throw CLIError.configuration("an experiment has 2 to 8 arms (--arm), not \(arms.count)") }
        guard Set(arms.map(\.name)).count == arms.count else { throw CLIError.configuration("--arm: two arms have one name") }
        guard holdout > 0, holdout < 1 else { throw CLIError.configuration("--holdout \(holdout): a share above 0 and below 1 (the estimates need a holdout)") }
        guard let mode = ExperimentAllocationMode(rawValue: allocation) else { throw CLIError.configuration("--allocation \(allocation.prefix(40)): fixed or adaptive") }
        guard floor >= 0, floor * Double(arms.count) <= 1, floor <= 0.5 else {
            throw CLIError.configuration("--floor \(floor): from 0 to 1 ÷ arms (\(arms.count) arms) and at most 0.5")
        }
        guard minMatured >= 1, (1...720).contains(decisionHours), (1...720).contains(cadenceHours) else {
            throw CLIError.configuration("--min-matured at least 1; --decision-hours and --cadence-hours from 1 to 720")
        }
        let w: [String: Double]
        do { w = try ExperimentWeights.resolve(try ExperimentsCommand.weights(weights), active: arms, current: Experiment.equalWeights(arms)) } catch let e as WeightsProblem {
            throw CLIError.configuration(e.description)
        }
        let e = Experiment(name: name, ruleName: rule, allocation: mode, holdout: holdout, arms: arms, period: 0, weights: w)
        guard name.range(of: "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$", options: .regularExpression) != nil else {
            throw CLIError.configuration("experiment name \(name.prefix(40)): 1 to 100 of A-Z a-z 0-9 _ . -")
        }
        return ExperimentRecord(experiment: e, minimumMatured: minMatured, floor: floor, revenueWeighted: !noRevenue, decisionHours: decisionHours,
                                cadenceHours: cadenceHours, startedAt: try TimeArgument.parse(asOf, flag: "--as-of") ?? Date())
    }

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let r = try record()
            let (client, store) = try await MessagesApple.open(global, app, apple, marking: true)
            for m in Set(r.experiment.arms.map(\.messageId)) { try await MessagesApple.requireApproved(m, client) }
            try await store.experimentAdd(r, by: ExperimentsCommand.by())
            let w = r.experiment.arms.map { "\($0.name) \(String(format: "%.3f", r.experiment.weights[$0.name] ?? 0))" }.joined(separator: ", ")
            print("experiment started: \(r.experiment.name) on rule \(r.experiment.ruleName), \(r.experiment.allocation.rawValue), holdout \(r.experiment.holdout); weights \(w)")
        }
    }
}

struct ExperimentList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The experiments, running first (one line each, or JSON lines).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @Flag(name: .customLong("json"), help: "One JSON object per line.") var json = false

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let all = try await app.singleStore(global).experiments().sorted { ($0.running ? 0 : 1, $0.experiment.name) < ($1.running ? 0 : 1, $1.experiment.name) }
            for r in all {
                if json { print(try JSONOutput.line(ExperimentJSON(r))); continue }
                let e = r.experiment
                let w = e.activeArms.map { "\($0.name) \(String(format: "%.3f", e.weights[$0.name] ?? 0))" }.joined(separator: ", ")
                print("\(e.name)  \(r.running ? "running" : "stopped")  rule \(e.ruleName)  \(e.allocation.rawValue)  holdout \(e.holdout)  period \(e.period)  weights \(w)")
            }
            if all.isEmpty, !json { print("no experiments (churnwatch experiments add NAME --rule R --arm ... --holdout 0.2)") }
        }
    }
}

/// `experiments list --json` and `show --json`: the contract's names.
struct ExperimentJSON: Encodable {
    struct Arm: Encodable {
        var name: String, kind: String, message_id: String, alternate_product_id: String?, billing_plan_type: String?, offer_id: String?
        var discount: Double, retired: Bool, weight: Double
    }
    var name: String, rule: String, allocation: String, holdout: Double, state: String, period: Int
    var min_matured: Int, floor: Double, revenue_weighted: Bool, decision_hours: Int, cadence_hours: Int
    var started_at: Date, stopped_at: Date?, period_started_at: Date
    var arms: [Arm]

    init(_ r: ExperimentRecord) {
        let e = r.experiment
        (name, rule, allocation, holdout, state, period) = (e.name, e.ruleName, e.allocation.rawValue, e.holdout, r.running ? "running" : "stopped", e.period)
        (min_matured, floor, revenue_weighted, decision_hours, cadence_hours) = (r.minimumMatured, r.floor, r.revenueWeighted, r.decisionHours, r.cadenceHours)
        (started_at, stopped_at, period_started_at) = (r.startedAt, r.stoppedAt, r.periodAt)
        arms = e.arms.map { Arm(name: $0.name, kind: $0.kind.rawValue, message_id: $0.messageId, alternate_product_id: $0.alternateProductId,
                                billing_plan_type: $0.billingPlanType, offer_id: $0.offerId, discount: $0.discount, retired: $0.retired,
                                weight: $0.retired ? 0 : e.weights[$0.name] ?? 0) }
    }
}

struct ExperimentShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "One experiment: its definition and every allocation (who, when, weights before and after, the posterior).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @Argument(help: "The experiment's name.") var name: String
    @Flag(name: .customLong("json"), help: "The experiment, then each allocation, one JSON object per line.") var json = false

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let store = try await app.singleStore(global)
            guard let r = try await store.experiments(name: name).first else {
                throw ExperimentError("no experiment \(name) in \(store.app) (`churnwatch experiments list` shows them)")
            }
            let history = try await store.experimentAllocations(name)
            if json {
                print(try JSONOutput.line(ExperimentJSON(r)))
                for a in history { print(try JSONOutput.line(a)) }
                return
            }
            let j = ExperimentJSON(r)
            print("\(j.name): \(j.state), rule \(j.rule), \(j.allocation), holdout \(j.holdout), min matured \(j.min_matured), floor \(j.floor), "
                  + "revenue weighted \(j.revenue_weighted), decision \(j.decision_hours) h, cadence \(j.cadence_hours) h")
            for a in j.arms {
                let answer = a.alternate_product_id.map { " → \($0)" } ?? a.offer_id.map { " offer \($0)" } ?? ""
                print("  arm \(a.name): \(a.kind) \(a.message_id)\(answer) discount \(a.discount)\(a.retired ? " (retired)" : "") weight \(String(format: "%.3f", a.weight))")
            }
            for a in history {
                let w = a.weights.sorted { $0.key < $1.key }.map { "\($0.key) \(String(format: "%.3f", $0.value))" }.joined(separator: ", ")
                print("  period \(a.period) from \(TimeArgument.iso(a.at)) by \(a.by): \(a.reason); \(w)")
            }
        }
    }
}

struct ExperimentSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Retire, revive or add arms, or set the weights by hand: a new allocation period.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Argument(help: "The experiment's name.") var name: String
    @Option(name: .customLong("retire"), help: "Arms that get no new subscriber (comma-separated); their history stays.") var retire: String?
    @Option(name: .customLong("revive"), help: "Retired arms to use again (comma-separated).") var revive: String?
    @Option(name: .customLong("add-arm"), help: ArgumentHelp("A new arm (repeat).", valueName: "spec")) var addArm: [String] = []
    @Option(name: .customLong("weights"), help: ArgumentHelp("The active arms' weights (default: kept, a new arm at their mean).", valueName: "a=1,b=1")) var weights: String?
    @Option(name: .customLong("as-of"), help: ArgumentHelp("The change's moment (default: now).", valueName: "time")) var asOf: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let added = try ExperimentsCommand.arms(addArm)
            let retire = MessagesCommand.list(retire), revive = MessagesCommand.list(revive)
            guard !(retire.isEmpty && revive.isEmpty && added.isEmpty && weights == nil) else {
                throw CLIError.configuration("experiments set needs --retire, --revive, --add-arm or --weights")
            }
            let w = try ExperimentsCommand.weights(weights)
            let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            let (client, store) = try await MessagesApple.open(global, app, apple, marking: true)
            for m in Set(added.map(\.messageId)) { try await MessagesApple.requireApproved(m, client) }
            try await store.experimentChangeArms(name, retire: retire, revive: revive, add: added, weights: w, at: at, by: ExperimentsCommand.by())
            let r = try await store.experiments(name: name).first
            let now = r.map { e in e.experiment.activeArms.map { "\($0.name) \(String(format: "%.3f", e.experiment.weights[$0.name] ?? 0))" }.joined(separator: ", ") } ?? ""
            print("experiment \(name): period \(r?.experiment.period ?? 0), weights \(now)")
        }
    }
}

struct ExperimentStop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stop", abstract: "Stop an experiment; --keep ARM makes the rule answer with that arm from now on.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @Argument(help: "The experiment's name.") var name: String
    @Option(name: .customLong("keep"), help: "The arm the rule keeps (its answer, and the experiment's holdout share); without it the rule answers as before.") var keep: String?
    @Option(name: .customLong("as-of"), help: ArgumentHelp("The stop's moment (default: now).", valueName: "time")) var asOf: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let store = try await app.singleStore(global, marking: true)
            try await store.experimentStop(name, keep: keep, at: try TimeArgument.parse(asOf, flag: "--as-of") ?? Date())
            print("experiment \(name) stopped" + (keep.map { "; its rule now answers with arm \($0)" } ?? "; its rule answers as before"))
        }
    }
}
