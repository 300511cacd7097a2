/// The experiment arm a cancel-page view is in. Raw values are the contract written to
/// `churnwatch.retention_message_requests.arm`.
public enum RetentionArm: String, Sendable, Codable, CaseIterable {
    /// A rule matched and the subscriber is not held out: the rule's answer.
    case treated
    /// A rule matched and the subscriber's draw holds them out: the default message.
    case holdout
    /// No rule matched: the default message.
    case noRule = "no_rule"
}

/// What the cancel page shows, chosen from the rules, the defaults, the facts and the
/// subscriber's draw. Pure: the same inputs give the same choice.
public struct RetentionChoice: Sendable, Equatable {
    public var arm: RetentionArm
    /// The rule that matched (also for the holdout); nil when none did.
    public var rule: RetentionRule?
    /// The message answered when not treated; nil when no default is known for the product and
    /// locale (the answer is then empty and Apple shows its own default).
    public var defaultMessageId: String?
    /// The running experiment on the matched rule, and the subscriber's place in it (nil: none).
    public var experiment: String?
    public var assignment: ExperimentAssignment?
    /// What a treated subscriber is shown: the rule's answer, or their arm's.
    public var answer: RetentionRule?

    public init(arm: RetentionArm, rule: RetentionRule?, defaultMessageId: String?, experiment: String? = nil,
                assignment: ExperimentAssignment? = nil, answer: RetentionRule? = nil) {
        (self.arm, self.rule, self.defaultMessageId) = (arm, rule, defaultMessageId)
        (self.experiment, self.assignment) = (experiment, assignment)
        self.answer = answer ?? (arm == .treated ? rule : nil)
    }

    /// The first rule (by priority, then name) that matches `facts`; the holdout when the
    /// subscriber's `draw` (in [0, 1)) is below that rule's share.
    public static func choose(rules: [RetentionRule], defaults: [RetentionDefault], facts: RetentionFacts, draw: Double) -> RetentionChoice {
        let ordered = rules.sorted { ($0.priority, $0.name) < ($1.priority, $1.name) }
        let fallback = defaultMessage(defaults, facts)
        guard let rule = ordered.first(where: { $0.matches(facts) }) else {
            return RetentionChoice(arm: .noRule, rule: nil, defaultMessageId: fallback)
        }
        if draw < rule.holdout { return RetentionChoice(arm: .holdout, rule: rule, defaultMessageId: fallback) }
        return RetentionChoice(arm: .treated, rule: rule, defaultMessageId: fallback)
    }

    /// As `choose`, with the running experiments: when the matched rule has one, the experiment's
    /// fixed holdout replaces the rule's, and a treated subscriber is shown their arm's answer.
    /// `armDraw` gives the subscriber's arm draw for an experiment's name; `recorded`, their
    /// assignment recorded at an earlier exposure (nil: none, or the database did not say).
    public static func choose(rules: [RetentionRule], defaults: [RetentionDefault], facts: RetentionFacts, draw: Double,
                              experiments: [Experiment], armDraw: (String) -> Double,
                              recorded: [String: ExperimentAssignment]) -> RetentionChoice {
        let plain = choose(rules: rules, defaults: defaults, facts: facts, draw: draw)
        guard let rule = plain.rule, let experiment = experiments.first(where: { $0.ruleName == rule.name }), !experiment.activeArms.isEmpty else {
            return plain
        }
        let a = experiment.assign(holdoutDraw: draw, armDraw: armDraw(experiment.name), recorded: recorded[experiment.name])
        guard !a.isHoldout, let arm = experiment.arms.first(where: { $0.name == a.arm }) else {
            return RetentionChoice(arm: .holdout, rule: rule, defaultMessageId: plain.defaultMessageId, experiment: experiment.name, assignment: a)
        }
        return RetentionChoice(arm: .treated, rule: rule, defaultMessageId: plain.defaultMessageId, experiment: experiment.name, assignment: a,
                               answer: arm.answering(rule))
    }

    /// The most specific default: product and locale, product and language, product, locale,
    /// language, then the one for everything.
    public static func defaultMessage(_ defaults: [RetentionDefault], _ facts: RetentionFacts) -> String? {
        func rank(_ d: RetentionDefault) -> Int? {
            var score = 0
            if let p = d.productId {
                guard p == facts.productId else { return nil }
                score += 4
            }
            if let l = d.locale {
                guard RetentionFacts.locale(l, covers: facts.userLocale) else { return nil }
                score += l.contains(where: { $0 == "-" || $0 == "_" }) ? 2 : 1
            }
            return score
        }
        return defaults.compactMap { d in rank(d).map { (d, $0) } }
            .max { ($0.1, $1.0.messageId) < ($1.1, $0.0.messageId) }?.0.messageId
    }
}
