import Foundation

/// One cancel-page experiment as `churnwatch report` shows it (`ChurnStore.reportExperiments`):
/// what it is, its weights over time and its readout as of the report's time (the same as
/// `churnwatch outcomes --experiment NAME --as-of` would print).
public struct ExperimentReportRow: Sendable, Equatable {
    public var name: String
    /// The cancel-page rule whose audience it answers.
    public var rule: String
    public var allocation: ExperimentAllocationMode
    /// The fixed share held out (shown the default), of everyone the rule matched.
    public var holdout: Double
    /// Running at the as-of time (started by then, not stopped by then).
    public var running: Bool
    public var startedAt: Date
    /// nil while running (or when it stopped after the as-of time).
    public var stoppedAt: Date?
    /// The decision metric's horizon: auto-renew still on this many hours after the view.
    public var decisionHours: Int
    /// Every allocation made by the as-of time, oldest first (period 0 at the start).
    public var history: [Allocation]
    /// Per arm and the holdout, and the sample-ratio check.
    public var readout: ExperimentReadout

    public init(name: String, rule: String, allocation: ExperimentAllocationMode, holdout: Double, running: Bool, startedAt: Date,
                stoppedAt: Date?, decisionHours: Int = 24, history: [Allocation], readout: ExperimentReadout) {
        (self.name, self.rule, self.allocation, self.holdout, self.running) = (name, rule, allocation, holdout, running)
        (self.startedAt, self.stoppedAt, self.decisionHours, self.history, self.readout) = (startedAt, stoppedAt, decisionHours, history, readout)
    }

    /// One allocation period: from `at`, the active arms' shares of the treated.
    public struct Allocation: Sendable, Equatable {
        public var period: Int
        public var at: Date
        public var weights: [String: Double]
        /// Why it began (`started`, `reallocated`, `retired a`...) and who made it.
        public var reason: String
        public var by: String

        public init(period: Int, at: Date, weights: [String: Double], reason: String, by: String = "") {
            (self.period, self.at, self.weights, self.reason, self.by) = (period, at, weights, reason, by)
        }
    }
}
