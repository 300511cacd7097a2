import ChurnModel
import ChurnReport
import Foundation

/// Report figures made up for renderer tests: a week of a small population, every panel
/// filled, with a database value where a hostile one could hide in each panel.
enum ReportFixtures {
    static let asOf = Date(timeIntervalSince1970: 1_790_820_000 + 6 * 86_400) // 2026-10-07T02:00:00Z
    static let hostile = "<script>alert(\"x\")</script>'&"

    static func week(product: String = "com.example.monthly", segment extra: String? = nil, endpoint: String = "status") -> ReportData {
        var data = ReportData(asOf: asOf, days: 7)
        data.subscriptions = 1_000
        for d in 0..<7 {
            var sizes = ["active": 700 - d * 5, "will_not_renew": 100 + d * 3, "billing_retry": 20 + d, "grace_period": 10,
                         "churned_voluntary": 50 + d, "unknown": 120 - d * 2]
            if let extra { sizes[extra] = 3 }
            data.segmentDays.append(.init(day: String(format: "2026-10-%02d", d + 1), sizes: sizes))
            data.events.append(.init(day: String(format: "2026-10-%02d", d + 1), event: "renewed", count: 30 + d))
            data.events.append(.init(day: String(format: "2026-10-%02d", d + 1), event: "auto_renew_disabled", count: 5 + d))
            data.events.append(.init(day: String(format: "2026-10-%02d", d + 1), event: "auto_renew_enabled", count: d % 3))
        }
        data.segmentProducts = [.init(segment: "active", productId: product, subscriptions: 670), .init(segment: "unknown", productId: "", subscriptions: 108)]
        data.flows = [.init(from: "active", to: "will_not_renew", last7: 21, last30: 21),
                      .init(from: "will_not_renew", to: "active", last7: 4, last30: 4),
                      .init(from: "billing_retry", to: "churned_billing", last7: 2, last30: 2)]
        data.billing = .init(inRetry: 26, inGrace: 10, recovery: (0...7).map { .init(day: $0, observed: 40 - $0 * 4, recovered: min($0 * 2, 40 - $0 * 4)) })
        data.winback = [.init(campaign: "save_offer", status: "pending", count: 80), .init(campaign: "save_offer", status: "done", count: 12),
                        .init(campaign: "billing_fix", status: "claimed", count: 9)]
        data.revenue = .init(rows: [.init(segment: "will_not_renew", currency: "USD", subscriptions: 118, milliunits: 1_178_820)])
        data.cancelViews = [.init(arm: "treated", shown: "promotional_offer", count: 30), .init(arm: "treated", shown: "message", count: 12),
                            .init(arm: "holdout", shown: "default", count: 9), .init(arm: "no_rule", shown: "default", count: 4)]
        data.cancelOutcomes = [.init(campaign: "cancel_page", offerId: "promotional_offer", entries: 60, delivered: 60, decided: 56, saved: 18,
                                     holdoutEntries: 40, holdoutDecided: 40, holdoutSaved: 6, medianDaysToSave: nil, revenueKept: ["USD": 89_910])]
        data.refunds.requests = 12
        (data.refunds.answeredInTime, data.refunds.notSent, data.refunds.failed, data.refunds.open) = (8, 4, 0, 0)
        (data.refunds.refunded, data.refunds.declined) = (4, 3)
        data.refunds.byBranch = [.init(branch: "decline_consumed", requests: 5, refunded: 1, declined: 3),
                                 .init(branch: "no_consent", requests: 4, refunded: 1, declined: 0),
                                 .init(branch: "no_preference", requests: 3, refunded: 2, declined: 0)]
        data.runs = (1...7).reversed().map { i in
            .init(id: Int64(i), kind: "nightly", status: "done", asOf: Date(timeIntervalSince1970: 1_790_820_000 + Double(i - 1) * 86_400),
                  due: 400, polled: 398, failed: 2, calls: [endpoint: 398, "history": 40], http429: 0, durationSeconds: 12.5)
        }
        data.webhooks = [
            .init(endpoint: "braze", url: "https://hooks.example.com/t/SECRET-TOKEN", enabled: true, failing: false, delivered: 1_204,
                  pending: 3, oldestPendingSeconds: 42, dead: 0, lastError: nil),
            .init(endpoint: endpoint, url: "https://crm.example.org/in", enabled: true, failing: true, delivered: 310, pending: 57,
                  oldestPendingSeconds: 5_400, dead: 2, lastError: "HTTP 500: upstream down"),
        ]
        data.experiments = [experiment()]
        return data
    }

    /// A cancel-page experiment of three arms started six days before `asOf`, reallocated three
    /// days and one day before it (periods 0, 1, 2), holdout 20 %; exposures as intended, or
    /// (`flagged`) with twice the holdout's share in period 0.
    static func experiment(name: String = "save_offers", rule: String = "at_risk", flagged: Bool = false, stoppedDaysAgo: Double? = nil) -> ExperimentReportRow {
        let m = "a1111111-1111-4111-8111-111111111111"
        let arms = [ExperimentArm(name: "message", kind: .message, messageId: m),
                    ExperimentArm(name: "half", kind: .promotionalOffer, messageId: m, offerId: "SAVE50", discount: 0.5),
                    ExperimentArm(name: "annual", kind: .alternateProduct, messageId: m, alternateProductId: "com.example.annual")]
        let start = asOf.addingTimeInterval(-6 * 86_400)
        let history: [ExperimentReportRow.Allocation] = [
            .init(period: 0, at: start, weights: ["message": 1.0 / 3, "half": 1.0 / 3, "annual": 1.0 / 3], reason: "started", by: "cli:ops"),
            .init(period: 1, at: start.addingTimeInterval(3 * 86_400), weights: ["message": 0.2, "half": 0.6, "annual": 0.2], reason: "reallocated",
                  by: "experiments update"),
            .init(period: 2, at: start.addingTimeInterval(5 * 86_400), weights: ["message": 0.1, "half": 0.8, "annual": 0.1], reason: "reallocated",
                  by: "experiments update"),
        ]
        // (period, arm, exposed, decided, saved): holdout 20 %, the arms 80 % × their weight.
        let counts: [(Int, String, Int, Int, Int)] = [
            (0, "holdout", flagged ? 150 : 60, 50, 10), (0, "message", 80, 70, 18), (0, "half", 80, 70, 26), (0, "annual", 80, 70, 15),
            (1, "holdout", 50, 40, 8), (1, "message", 40, 30, 8), (1, "half", 120, 90, 33), (1, "annual", 40, 30, 7),
            (2, "holdout", 20, 0, 0), (2, "message", 8, 0, 0), (2, "half", 64, 0, 0), (2, "annual", 8, 0, 0),
        ]
        let cells = counts.map { c in
            ExperimentCellCounts(period: c.0, arm: c.1, exposed: c.2, matured: c.2 * 3 / 4, renewing: c.2 * 3 / 4 * (c.1 == "half" ? 7 : 5) / 10,
                                 decided: c.3, saved: c.4, savedPrice: c.4 > 0 ? ["USD": Int64(c.4) * 9_990] : [:])
        }
        let e = Experiment(name: name, ruleName: rule, allocation: .adaptive, holdout: 0.2, arms: arms, period: 2, weights: history[2].weights)
        let intended = Dictionary(uniqueKeysWithValues: history.map { ($0.period, $0.weights) })
        let readout = ExperimentReadout.read(e, cells: cells, intended: intended, seed: ExperimentRandom.seed(name, -1))
        return ExperimentReportRow(name: name, rule: rule, allocation: .adaptive, holdout: 0.2, running: stoppedDaysAgo == nil, startedAt: start,
                                   stoppedAt: stoppedDaysAgo.map { asOf.addingTimeInterval(-$0 * 86_400) }, decisionHours: 24,
                                   history: history, readout: readout)
    }
}
