import Foundation

/// Which nightly runs one `churnwatch run` works, in which order, and whether it plans tonight's:
/// the rule that an unfinished night never swallows the next one. Pure: no clock, no I/O.
///
/// A night is a UTC day (the day `segment_daily` is written for). An unfinished run of tonight
/// (or of a later day, when an operator replays an earlier `--as-of`) is resumed and nothing is
/// planned; a finished run of tonight means the night is done, and nothing is planned either (a
/// re-run after another app of the same night stopped adds no empty run). Unfinished runs of earlier days are resumed oldest first and closed (each writes its
/// own day of history); tonight's run is planned before them, so a stop while an old night is
/// being finished cannot cost tonight its run, and it is worked after them.
public struct NightlyQueue: Sendable, Equatable {
    /// An unfinished nightly run.
    public struct Night: Sendable, Equatable {
        public var runId: Int64
        public var asOf: Date
        public init(runId: Int64, asOf: Date) {
            self.runId = runId
            self.asOf = asOf
        }
    }

    /// Unfinished runs to resume, in the order they are worked (oldest night first).
    public var resume: [Int64]
    /// Tonight has no run yet: plan it first, work it after `resume`.
    public var planTonight: Bool
    /// Tonight's run that already finished (nothing planned for it again).
    public var doneTonight: Int64?

    public init(resume: [Int64], planTonight: Bool, doneTonight: Int64? = nil) {
        self.resume = resume
        self.planTonight = planTonight
        self.doneTonight = doneTonight
    }

    /// The queue for tonight (`asOf`), given the unfinished nightly runs and a finished one of
    /// tonight's day, if any (``nightRange(_:)``).
    public static func decide(unfinished: [Night], finishedTonight: Night? = nil, tonight asOf: Date) -> NightlyQueue {
        let tonight = day(asOf)
        let ordered = unfinished.sorted { ($0.asOf, $0.runId) < ($1.asOf, $1.runId) }
        let hasTonight = ordered.contains { day($0.asOf) >= tonight }
        let done = finishedTonight.flatMap { day($0.asOf) == tonight ? $0.runId : nil }
        return NightlyQueue(resume: ordered.map(\.runId), planTonight: !hasTonight && done == nil, doneTonight: hasTonight ? nil : done)
    }

    /// The UTC day number of `date` (days since 1970-01-01).
    public static func day(_ date: Date) -> Int {
        Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
    }

    /// The moments of the night (UTC day) `date` falls in.
    public static func nightRange(_ date: Date) -> Range<Date> {
        let start = Date(timeIntervalSince1970: Double(day(date)) * 86_400)
        return start..<start.addingTimeInterval(86_400)
    }
}

/// What the owner of a run does once its queue is drained, when some items failed only because
/// Apple rate limited them (429s past the call's wait budget). Such items are not the
/// subscription's fault and are never left counted as the night's result: they are polled again
/// within the run, a few rounds, and if Apple still refuses the run stops resumable (exit 75) so
/// the next `run` tries them again. Pure.
public struct RateLimitedRetryRule: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Nothing failed from rate limiting: close the run.
        case finish
        /// Put the rate-limited items back to pending and work the run again.
        case retry
        /// Rounds used up: stop, resumable.
        case stopResumable
    }

    /// Rounds of retries within one run.
    public var maxRounds: Int

    public init(maxRounds: Int = 3) { self.maxRounds = max(0, maxRounds) }

    /// - Parameters:
    ///   - rateLimited: items of the drained run that failed "rate limited".
    ///   - roundsDone: retry rounds already made in this process.
    public func decide(rateLimited: Int, roundsDone: Int) -> Action {
        if rateLimited == 0 { return .finish }
        return roundsDone < maxRounds ? .retry : .stopResumable
    }
}
