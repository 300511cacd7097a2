import ChurnModel
import Foundation
import Postgres

/// An experiment as stored (docs/contracts.md "Experiments").
public struct ExperimentRecord: Sendable, Equatable {
    public var experiment: Experiment
    public var minimumMatured: Int
    public var floor: Double
    public var revenueWeighted: Bool
    public var decisionHours: Int
    public var cadenceHours: Int
    public var running: Bool
    public var startedAt: Date
    public var stoppedAt: Date?
    /// When the current allocation began.
    public var periodAt: Date

    public init(experiment: Experiment, minimumMatured: Int = 100, floor: Double = 0.05, revenueWeighted: Bool = true, decisionHours: Int = 24,
                cadenceHours: Int = 24, running: Bool = true, startedAt: Date, stoppedAt: Date? = nil, periodAt: Date? = nil) {
        (self.experiment, self.minimumMatured, self.floor, self.revenueWeighted) = (experiment, minimumMatured, floor, revenueWeighted)
        (self.decisionHours, self.cadenceHours, self.running, self.startedAt) = (decisionHours, cadenceHours, running, startedAt)
        (self.stoppedAt, self.periodAt) = (stoppedAt, periodAt ?? startedAt)
    }
}

/// One allocation of an experiment's weights.
public struct ExperimentAllocationRecord: Sendable, Equatable, Codable {
    public var period: Int
    public var at: Date
    public var by: String
    public var reason: String
    public var weights: [String: Double]
    public var previous: [String: Double]?
    /// The posterior an adaptive allocation was computed from (JSON as stored).
    public var posterior: [ArmPosterior]?
}

/// One line for an experiment command that cannot be done (exit 78).
public struct ExperimentError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension ChurnStore {
    /// Changes whenever the app's rules, defaults or experiments do (as `retentionLookup` reads it).
    static func retentionVersion(_ app: String) -> PostgresQuery {
        """
        (SELECT count(*) || ':' || coalesce(max(updated_at)::text, '') FROM churnwatch.retention_rules WHERE bundle_id = \(app))
        || '/' || (SELECT count(*) || ':' || coalesce(max(updated_at)::text, '') FROM churnwatch.retention_defaults WHERE bundle_id = \(app))
        || '/' || (SELECT count(*) || ':' || coalesce(max(updated_at)::text, '') FROM churnwatch.experiments WHERE bundle_id = \(app))
        """
    }

    /// The experiments of this app (`runningOnly`: those `serve` answers with), with arms and current weights.
    public func experiments(runningOnly: Bool = false, name: String? = nil) async throws -> [ExperimentRecord] {
        try await pool.withConnection { db in try Self.experiments(db, app: app, runningOnly: runningOnly, name: name) }
    }

    static func experiments(_ db: PostgresConnection, app: String, runningOnly: Bool, name: String?) throws -> [ExperimentRecord] {
        let arms = try db.query("""
            SELECT experiment, arm, kind, message_id::text AS message_id, alternate_product_id, billing_plan_type, offer_id, discount,
                   retired_at IS NOT NULL AS retired
            FROM churnwatch.experiment_arms WHERE bundle_id = \(app) AND (\(name)::text IS NULL OR experiment = \(name)::text)
            ORDER BY experiment, position
            """).map { row -> (String, ExperimentArm) in
            (try row.decode(String.self, "experiment"), ExperimentArm(
                name: try row.decode(String.self, "arm"), kind: RetentionAnswerKind(rawValue: try row.decode(String.self, "kind")) ?? .message,
                messageId: try row.decode(String.self, "message_id"), alternateProductId: try row.decode(String?.self, "alternate_product_id"),
                billingPlanType: try row.decode(String?.self, "billing_plan_type"), offerId: try row.decode(String?.self, "offer_id"),
                discount: try row.decode(Double.self, "discount"), retired: try row.decode(Bool.self, "retired")))
        }
        return try db.query("""
            SELECT e.name, e.rule_name, e.allocation, e.holdout, e.min_matured, e.floor, e.revenue_weighted, e.decision_hours, e.cadence_hours,
                   e.state = 'running' AS running, e.started_at, e.stopped_at, a.period, a.at AS period_at, a.weights::text AS weights
            FROM churnwatch.experiments e
            JOIN LATERAL (SELECT period, at, weights FROM churnwatch.experiment_allocations x
                          WHERE x.bundle_id = e.bundle_id AND x.experiment = e.name ORDER BY period DESC LIMIT 1) a ON true
            WHERE e.bundle_id = \(app) AND (e.state = 'running' OR NOT \(runningOnly)) AND (\(name)::text IS NULL OR e.name = \(name)::text)
            ORDER BY e.name
            """).map { row in
            let name = try row.decode(String.self, "name")
            let weights = try JSONDecoder().decode([String: Double].self, from: Data(try row.decode(String.self, "weights").utf8))
            let e = Experiment(
                name: name, ruleName: try row.decode(String.self, "rule_name"),
                allocation: ExperimentAllocationMode(rawValue: try row.decode(String.self, "allocation")) ?? .fixed,
                holdout: try row.decode(Double.self, "holdout"), arms: arms.filter { $0.0 == name }.map(\.1),
                period: try row.decode(Int.self, "period"), weights: weights)
            return ExperimentRecord(
                experiment: e, minimumMatured: try row.decode(Int.self, "min_matured"), floor: try row.decode(Double.self, "floor"),
                revenueWeighted: try row.decode(Bool.self, "revenue_weighted"), decisionHours: try row.decode(Int.self, "decision_hours"),
                cadenceHours: try row.decode(Int.self, "cadence_hours"), running: try row.decode(Bool.self, "running"),
                startedAt: try row.decode(Date.self, "started_at"), stoppedAt: try row.decode(Date?.self, "stopped_at"),
                periodAt: try row.decode(Date.self, "period_at"))
        }
    }

    /// Adds a running experiment on a rule, with its arms and allocation 0.
    public func experimentAdd(_ r: ExperimentRecord, by: String) async throws {
        let e = r.experiment
        try await pool.withTransaction { db in
            guard try db.query("SELECT 1 FROM churnwatch.retention_rules WHERE bundle_id = \(app) AND name = \(e.ruleName)").first != nil else {
                throw ExperimentError("no cancel-page rule \(e.ruleName) in \(app) (`churnwatch messages rules list` shows them): an experiment answers a rule's audience")
            }
            if let other = try db.query("""
                SELECT name FROM churnwatch.experiments WHERE bundle_id = \(app) AND (name = \(e.name) OR (rule_name = \(e.ruleName) AND state = 'running'))
                """).first {
                let n = try other.decode(String.self, "name")
                throw ExperimentError(n == e.name ? "experiment \(n) exists already in \(app) (names are kept after stop: choose another)"
                                                  : "rule \(e.ruleName) has a running experiment already (\(n)): stop it first")
            }
            try db.execute("""
                INSERT INTO churnwatch.experiments (bundle_id, name, rule_name, allocation, holdout, min_matured, floor, revenue_weighted,
                    decision_hours, cadence_hours, started_at)
                VALUES (\(app), \(e.name), \(e.ruleName), \(e.allocation.rawValue), \(e.holdout), \(r.minimumMatured), \(r.floor),
                    \(r.revenueWeighted), \(r.decisionHours), \(r.cadenceHours), \(r.startedAt))
                """)
            for (k, arm) in e.arms.enumerated() { try Self.insertArm(db, app: app, experiment: e.name, arm, position: k) }
            try Self.insertAllocation(db, app: app, experiment: e.name, period: 0, at: r.startedAt, by: by, reason: "started",
                                      weights: e.weights, previous: nil, posterior: nil)
        }
    }

    static func insertArm(_ db: PostgresConnection, app: String, experiment: String, _ arm: ExperimentArm, position: Int) throws {
        try db.execute("""
            INSERT INTO churnwatch.experiment_arms (bundle_id, experiment, arm, position, kind, message_id, alternate_product_id,
                billing_plan_type, offer_id, discount)
            VALUES (\(app), \(experiment), \(arm.name), \(position), \(arm.kind.rawValue), \(arm.messageId)::uuid, \(arm.alternateProductId),
                \(arm.billingPlanType), \(arm.offerId), \(arm.discount))
            """)
    }

    static func insertAllocation(_ db: PostgresConnection, app: String, experiment: String, period: Int, at: Date, by: String, reason: String,
                                 weights: [String: Double], previous: [String: Double]?, posterior: [ArmPosterior]?) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let w = String(decoding: try encoder.encode(weights), as: UTF8.self)
        let p = try previous.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        let post = try posterior.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
        try db.execute("""
            INSERT INTO churnwatch.experiment_allocations (bundle_id, experiment, period, at, by, reason, weights, previous, posterior)
            VALUES (\(app), \(experiment), \(period), \(at), \(by), \(reason), \(w)::jsonb, \(p)::jsonb, \(post)::jsonb)
            """)
        try db.execute("UPDATE churnwatch.experiments SET updated_at = now() WHERE bundle_id = \(app) AND name = \(experiment)")
    }

    /// A new allocation period for a running experiment whose current period is `after` (the
    /// caller's read): false, and nothing written, when another allocation came first.
    @discardableResult
    public func experimentAllocate(_ name: String, after: Int, at: Date, by: String, reason: String, weights: [String: Double],
                                   previous: [String: Double]?, posterior: [ArmPosterior]?) async throws -> Bool {
        try await pool.withTransaction { db in
            let current = try db.query("""
                SELECT max(a.period) AS p FROM churnwatch.experiment_allocations a JOIN churnwatch.experiments e
                    ON e.bundle_id = a.bundle_id AND e.name = a.experiment AND e.state = 'running'
                WHERE a.bundle_id = \(app) AND a.experiment = \(name)
                """).first.flatMap { try? $0.decode(Int?.self, "p") }
            guard current == after else { return false }
            try db.execute("SELECT 1 FROM churnwatch.experiments WHERE bundle_id = \(app) AND name = \(name) FOR UPDATE")
            try Self.insertAllocation(db, app: app, experiment: name, period: after + 1, at: at, by: by, reason: reason,
                                      weights: weights, previous: previous, posterior: posterior)
            return true
        }
    }

    /// Retires (or revives) arms and adds new ones; the weights that follow start a new period.
    public func experimentChangeArms(_ name: String, retire: [String], revive: [String], add: [ExperimentArm], weights: [String: Double]?,
                                     at: Date, by: String) async throws {
        try await pool.withTransaction { db in
            guard let r = try Self.experiments(db, app: app, runningOnly: true, name: name).first else {
                throw ExperimentError("no running experiment \(name) in \(app) (`churnwatch experiments list` shows them)")
            }
            try db.execute("SELECT 1 FROM churnwatch.experiments WHERE bundle_id = \(app) AND name = \(name) FOR UPDATE")
            var arms = r.experiment.arms
            for n in retire + revive where !arms.contains(where: { $0.name == n }) {
                throw ExperimentError("experiment \(name) has no arm \(n) (it has \(arms.map(\.name).joined(separator: ", ")))")
            }
            for a in add {
                guard !arms.contains(where: { $0.name == a.name }) else { throw ExperimentError("experiment \(name) has an arm \(a.name) already") }
                try Self.insertArm(db, app: app, experiment: name, a, position: arms.count)
                arms.append(a)
            }
            try db.execute("""
                UPDATE churnwatch.experiment_arms SET retired_at = CASE WHEN arm = ANY(\(retire)::text[]) THEN coalesce(retired_at, \(at)) ELSE NULL END
                WHERE bundle_id = \(app) AND experiment = \(name) AND (arm = ANY(\(retire)::text[]) OR arm = ANY(\(revive)::text[]))
                """)
            for k in arms.indices {
                if retire.contains(arms[k].name) { arms[k].retired = true }
                if revive.contains(arms[k].name) { arms[k].retired = false }
            }
            let active = arms.filter { !$0.retired }
            guard !active.isEmpty else { throw ExperimentError("experiment \(name) would have no active arm: stop it instead") }
            let next: [String: Double]
            do { next = try ExperimentWeights.resolve(weights, active: active, current: r.experiment.weights) } catch let problem as WeightsProblem { throw ExperimentError(problem.description) }
            try Self.insertAllocation(db, app: app, experiment: name, period: r.experiment.period + 1, at: at, by: by,
                                      reason: Self.changeReason(retire: retire, revive: revive, add: add, weights: weights),
                                      weights: next, previous: r.experiment.weights, posterior: nil)
        }
    }

    static func changeReason(retire: [String], revive: [String], add: [ExperimentArm], weights: [String: Double]?) -> String {
        var parts: [String] = []
        if !retire.isEmpty { parts.append("retired " + retire.joined(separator: ",")) }
        if !revive.isEmpty { parts.append("revived " + revive.joined(separator: ",")) }
        if !add.isEmpty { parts.append("added " + add.map(\.name).joined(separator: ",")) }
        if weights != nil { parts.append("weights set") }
        return parts.joined(separator: "; ")
    }

    /// Stops an experiment; with `keep`, the rule answers with that arm's answer from now on
    /// (and keeps the experiment's holdout share).
    public func experimentStop(_ name: String, keep: String?, at: Date) async throws {
        try await pool.withTransaction { db in
            guard let r = try Self.experiments(db, app: app, runningOnly: true, name: name).first else {
                throw ExperimentError("no running experiment \(name) in \(app) (`churnwatch experiments list` shows them)")
            }
            if let keep {
                guard let arm = r.experiment.arms.first(where: { $0.name == keep }) else {
                    throw ExperimentError("experiment \(name) has no arm \(keep) (it has \(r.experiment.arms.map(\.name).joined(separator: ", ")))")
                }
                try db.execute("""
                    UPDATE churnwatch.retention_rules SET kind = \(arm.kind.rawValue), message_id = \(arm.messageId)::uuid,
                        alternate_product_id = \(arm.alternateProductId), billing_plan_type = \(arm.billingPlanType), offer_id = \(arm.offerId),
                        holdout = \(r.experiment.holdout), updated_at = now()
                    WHERE bundle_id = \(app) AND name = \(r.experiment.ruleName)
                    """)
            }
            try db.execute("""
                UPDATE churnwatch.experiments SET state = 'stopped', stopped_at = \(at), updated_at = now() WHERE bundle_id = \(app) AND name = \(name)
                """)
        }
    }

    /// Every allocation of an experiment, in order.
    public func experimentAllocations(_ name: String) async throws -> [ExperimentAllocationRecord] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT period, at, by, reason, weights::text AS w, previous::text AS p, posterior::text AS post
                FROM churnwatch.experiment_allocations WHERE bundle_id = \(app) AND experiment = \(name) ORDER BY period
                """).map { row in
                let d = JSONDecoder()
                return ExperimentAllocationRecord(
                    period: try row.decode(Int.self, "period"), at: try row.decode(Date.self, "at"), by: try row.decode(String.self, "by"),
                    reason: try row.decode(String.self, "reason"),
                    weights: try d.decode([String: Double].self, from: Data(try row.decode(String.self, "w").utf8)),
                    previous: try row.decode(String?.self, "p").map { try d.decode([String: Double].self, from: Data($0.utf8)) },
                    posterior: try row.decode(String?.self, "post").map { try d.decode([ArmPosterior].self, from: Data($0.utf8)) })
            }
        }
    }
}
