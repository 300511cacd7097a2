import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation
import Logging
import Polling

/// How refund requests are answered (docs/contracts.md "Refund requests"): flags, else
/// environment variables, else the defaults.
struct RefundOptions: ParsableArguments {
    @Option(name: .customLong("refund-answers"), help: ArgumentHelp("on: answer Apple's refund requests (CONSUMPTION_REQUEST) the change feed read, for customers with consent in churnwatch.refund_consent; off: record them only (default: $CHURNWATCH_REFUND_ANSWERS, else on).", valueName: "on|off"))
    var answers: String?

    @Option(name: .customLong("refund-decline-after"), help: ArgumentHelp("Ask Apple to decline a refund of a delivered purchase when at least this share of its period had passed (0 to 1), or off: never state a preference (default: $CHURNWATCH_REFUND_DECLINE_AFTER, else off).", valueName: "share|off"))
    var declineAfter: String?

    /// The policy; one line naming the flag or variable when a value is wrong (78).
    func policy(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> RefundAnswerPolicy {
        let (name, value) = declineAfter.map { ("--refund-decline-after", $0) }
            ?? ("CHURNWATCH_REFUND_DECLINE_AFTER", env["CHURNWATCH_REFUND_DECLINE_AFTER"] ?? "")
        let text = value.trimmingCharacters(in: .whitespaces).lowercased()
        if text.isEmpty || text == "off" { return RefundAnswerPolicy(declineAfterShare: nil) }
        guard let share = Double(text), share.isFinite, (0...1).contains(share) else {
            throw CLIError.configuration("\(name) \"\(value.prefix(40))\" is not a share from 0 to 1, nor off")
        }
        return RefundAnswerPolicy(declineAfterShare: share)
    }

    /// The policy when answering is on, nil when off; one line naming the flag or variable when
    /// a value is wrong (78). Commands call it before they connect to anything.
    func validated(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> RefundAnswerPolicy? {
        let (name, value) = answers.map { ("--refund-answers", $0) } ?? ("CHURNWATCH_REFUND_ANSWERS", env["CHURNWATCH_REFUND_ANSWERS"] ?? "")
        let policy = try policy(env)
        return try onOffSetting(name, value) ? policy : nil
    }

    /// The answerer for a validated policy (nil: answering is off).
    static func answerer(_ policy: RefundAnswerPolicy?, client: AppStoreServerAPIClient, store: ChurnStore, logger: Logger) -> RefundAnswerer? {
        policy.map { RefundAnswerer(client: client, store: store, policy: $0, logger: logger) }
    }
}

enum RefundAnswerText {
    /// One line for a pass over the open refund requests.
    static func line(_ s: RefundAnswerSummary) -> String {
        var line = "refund requests: \(s.answered) answered, \(s.noConsent) without consent, \(s.expired) past their deadline, "
            + "\(s.failed) refused by Apple, \(s.retried) left for the next sync"
        if let stop = s.stop { line += "; stopped: \(stop.reason)" }
        return line
    }
}
