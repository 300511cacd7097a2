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
        return data
    }
}
