import ChurnModel
import Foundation

/// The outcomes part of panel 5: per campaign and offer, what the treated entries did against
/// the holdout (docs/churn-model.md §6). Shares and the interval come from `UpliftEstimate`,
/// the same arithmetic as `churnwatch outcomes`.
enum WinbackOutcomes {
    static let headers = ["campaign", "offer", "entries", "delivered", "saved share", "holdout", "holdout saved share",
                          "uplift [95 % interval]", "median days to save", "revenue kept"]

    static func render(_ outcomes: [ReportData.Outcome], _ ids: Anchors = .single) -> HTML {
        guard !outcomes.isEmpty else {
            return "<h3>Outcomes</h3><p class=\"nothing\" id=\"\(ids("winback-outcomes"))\">No outcomes yet: the queue has no entries. Saved share, holdout and uplift per campaign and offer appear here once runs add some.</p>"
        }
        var table = Table(id: ids("t-outcomes"), caption: "Outcomes per campaign and offer: treated entries against the holdout (shares over decided entries)",
                          headers: headers)
        for o in outcomes {
            let treated = o.decided > 0 ? Double(o.saved) / Double(o.decided) : nil
            let held = o.holdoutDecided > 0 ? Double(o.holdoutSaved) / Double(o.holdoutDecided) : nil
            table.add(o.campaign, [o.offerId ?? "(none)", Format.count(o.entries), Format.count(o.delivered), Format.percent(treated),
                                   Format.count(o.holdoutEntries), Format.percent(held), uplift(o), days(o.medianDaysToSave), revenue(o.revenueKept)])
        }
        return """
            <h3>Outcomes</h3><div id="\(ids("winback-outcomes"))">\(table.html)<p class="meta">Uplift: the treated saved share minus the holdout's, \
            in percentage points, with its 95 % interval; "too few to say" below \(UpliftEstimate.minimumGroup) decided entries in a group. \
            Revenue kept: renewal price × treated saves.</p></div>
            """
    }

    /// `+4.2 pp [+1.0, +7.4]`, with "too few to say" when a group is small; `–` when a group has
    /// no decided entry.
    static func uplift(_ o: ReportData.Outcome) -> String {
        guard let u = UpliftEstimate(treatedSaved: o.saved, treated: o.decided, heldOutSaved: o.holdoutSaved, heldOut: o.holdoutDecided) else {
            return "–"
        }
        let text = String(format: "%+.1f pp [%+.1f, %+.1f]", u.uplift * 100, u.low * 100, u.high * 100)
        return u.tooFewToSay ? text + " too few to say" : text
    }

    static func days(_ d: Double?) -> String { d.map { String(format: "%.1f", $0) } ?? "–" }

    /// `USD 12.34, EUR 5.00` (currencies in order); `–` when nothing is kept.
    static func revenue(_ kept: [String: Int64]) -> String {
        kept.isEmpty ? "–" : kept.keys.sorted().map { "\($0) \(Format.amount(milliunits: kept[$0] ?? 0, currency: $0))" }.joined(separator: ", ")
    }
}
