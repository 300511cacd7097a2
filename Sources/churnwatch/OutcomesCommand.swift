import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

struct OutcomesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outcomes",
        abstract: "What the win-back campaigns and their offers changed: saves against the holdout, with a 95 % interval.",
        discussion: """
            One line per campaign and offer (--by campaign: per campaign; --by product: per campaign, offer and \
            product) over the entries opened since --since (by the run or sync that opened them). Shares are over decided entries (saved or lost: a save offer by whether the \
            period renewed, docs/churn-model.md; an entry whose horizon has passed without a save is lost). The uplift is the treated saved share minus the \
            holdout's, with Newcombe's 95 % interval (docs/churn-model.md); it is empty when a group has no decided \
            entry, and flagged "too few" below 30 decided entries in a group. Revenue kept: renewal price × treated \
            saves, per currency.

            --json fields: campaign, offer_id, [product_id,] entries, delivered, decided, saved, saved_share, \
            holdout_entries, holdout_decided, holdout_saved, holdout_saved_share, uplift, uplift_low, uplift_high, \
            too_few_to_say, median_days_to_save, revenue_kept ({currency: amount}), bundle_id. --csv: the same columns, \
            revenue_kept as "USD 12.34;JPY 1490" (each currency in its own minor units).

            Several apps (every app in churnwatch.apps, or those given with --app): each app's lines after a line \
            "app BUNDLE_ID"; with --json or --csv every app's rows one after the other, each naming its app in bundle_id.

            --campaign cancel_page: the cancel page instead (docs/contracts.md "The cancel page"): one line per kind of answer \
            (answer_kind: message, alternate_product, promotional_offer), over each subscriber's first view a rule matched; \
            entries are the treated subscribers, saved those whose subscription renewed past the period they were in at the \
            view (35 days on when that period had ended), the holdout those the rule's share held out (shown the default message).

            --experiment NAME: one experiment (docs/contracts.md "Experiments"): a line per arm and the holdout, then the \
            sample-ratio check and each allocation period's weights; --json: a summary object, then one object per arm.

            Exit codes: 0; 78 a bad value or unknown experiment; 64 a malformed command line; 69 database unreachable.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    @Option(name: .customLong("since"), help: ArgumentHelp("Only entries opened since this time, by their run's or sync's moment (ISO 8601 or YYYY-MM-DD).", valueName: "time"))
    var since: String?

    @Option(name: .customLong("campaign"), help: "Only this campaign's lines: a win-back campaign, or cancel_page (the cancel page's rules, one line per kind of answer, treated against the holdout; not shown without it).")
    var campaign: String?

    @Option(name: .customLong("experiment"), help: "One experiment instead: per arm, exposures, the 24-hour metric, the long outcome, uplift against the holdout with its interval (stratified by allocation period), P(best), revenue kept, weights over time and the sample-ratio check.")
    var experiment: String?

    @Option(name: .customLong("by"), help: "offer (default), product or campaign.")
    var by = "offer"

    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment horizons are judged at, ISO 8601 (default: now).", valueName: "time"))
    var asOf: String?

    @Flag(name: .customLong("csv"), help: "CSV with a header.")
    var csv = false

    @Flag(name: .customLong("json"), help: "One JSON object per line.")
    var json = false

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            guard let grouping = OutcomeSummary.Grouping(rawValue: by) else {
                throw CLIError.configuration("--by \"\(by)\" is not one of offer, product, campaign")
            }
            guard !(csv && json) else { throw CLIError.configuration("--csv and --json exclude each other: give one") }
            let since = try TimeArgument.parse(self.since, flag: "--since")
            let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
            if let experiment {
                guard campaign == nil, !csv else { throw CLIError.configuration("--experiment takes neither --campaign nor --csv") }
                try await OutcomesExperiment.print(try await app.singleStore(global), name: experiment, asOf: at, json: json)
                return
            }
            var blocks: [(app: String, rows: [OutcomeJSON])] = []
            if let campaign, campaign != "cancel_page", WinbackCampaign(rawValue: campaign) == nil {
                throw CLIError.configuration("--campaign \"\(campaign.prefix(40))\" is not one of \(WinbackCampaign.allCases.map(\.rawValue).joined(separator: ", ")), cancel_page")
            }
            for store in try await app.readingStores(global) {
                let rows = campaign == "cancel_page" ? try await store.cancelPageOutcomes(since: since, asOf: at)
                    : try await store.outcomeSummaries(since: since, grouping: grouping, asOf: at).filter { campaign == nil || $0.campaign == campaign }
                blocks.append((store.app, rows.map { OutcomeJSON($0, app: store.app) }))
            }
            guard !blocks.isEmpty else { return }
            let byProduct = grouping == .product
            if json {
                for row in blocks.flatMap(\.rows) { print(try JSONOutput.line(row)) }
            } else if csv {
                print(OutcomeJSON.csvHeader(byProduct: byProduct))
                for row in blocks.flatMap(\.rows) { print(row.csv(byProduct: byProduct)) }
            } else {
                PerAppText.lines(blocks.map { ($0.app, Self.table($0.rows, byProduct: byProduct)) }).forEach { print($0) }
            }
        }
    }

    static func table(_ rows: [OutcomeJSON], byProduct: Bool) -> [String] {
        func pct(_ x: Double?) -> String { x.map { String(format: "%.1f%%", $0 * 100) } ?? "-" }
        func pad(_ s: String, _ n: Int) -> String { s.padding(toLength: max(n, s.count + 1), withPad: " ", startingAt: 0) }
        var out = [pad("campaign", 20) + pad("offer", 18) + (byProduct ? pad("product", 20) : "") + pad("entries", 9) + pad("delivered", 10)
                   + pad("saved", 8) + pad("holdout", 9) + pad("held saved", 11) + pad("uplift [95 % CI]", 30) + pad("median d", 9) + "revenue kept"]
        for r in rows {
            var uplift = "-"
            if let u = r.uplift, let l = r.uplift_low, let h = r.uplift_high {
                uplift = String(format: "%+.1f pp [%+.1f, %+.1f]", u * 100, l * 100, h * 100) + (r.too_few_to_say ? " too few" : "")
            }
            out.append(pad(r.campaign, 20) + pad(r.answer_kind ?? r.offer_id ?? "(none)", 18) + (byProduct ? pad(r.product_id ?? "-", 20) : "")
                       + pad(String(r.entries), 9) + pad(String(r.delivered), 10) + pad(pct(r.saved_share), 8)
                       + pad(String(r.holdout_entries), 9) + pad(pct(r.holdout_saved_share), 11) + pad(uplift, 30)
                       + pad(r.median_days_to_save.map { String(format: "%.1f", $0) } ?? "-", 9) + r.revenueText(separator: ", "))
        }
        if rows.isEmpty { out.append("no outcomes yet") }
        return out
    }
}

/// One line of `churnwatch outcomes --json`: the contract's names.
struct OutcomeJSON: Encodable {
    /// The app the line is of.
    var bundle_id: String
    var campaign: String, offer_id: String?, product_id: String?
    /// The cancel page's lines only: the kind of answer.
    var answer_kind: String?
    var entries: Int, delivered: Int, decided: Int, saved: Int, saved_share: Double?
    var holdout_entries: Int, holdout_decided: Int, holdout_saved: Int, holdout_saved_share: Double?
    var uplift: Double?, uplift_low: Double?, uplift_high: Double?, too_few_to_say: Bool
    var median_days_to_save: Double?
    /// Currency → amount in units (milliunits / 1000, exact).
    var revenue_kept: [String: Decimal]
    /// Currency → milliunits, for text in each currency's minor units.
    var keptMilliunits: [String: Int64]

    init(_ s: OutcomeSummary, app: String) {
        bundle_id = app
        campaign = s.campaign; offer_id = s.offerId; product_id = s.productId; answer_kind = s.answerKind
        entries = s.entries; delivered = s.delivered; decided = s.decided; saved = s.saved; saved_share = s.savedShare
        holdout_entries = s.holdoutEntries; holdout_decided = s.holdoutDecided; holdout_saved = s.holdoutSaved
        holdout_saved_share = s.holdoutSavedShare
        let estimate = s.uplift
        uplift = estimate?.uplift; uplift_low = estimate?.low; uplift_high = estimate?.high
        too_few_to_say = estimate?.tooFewToSay ?? true
        median_days_to_save = s.medianDaysToSave
        revenue_kept = s.revenueKept.mapValues { Decimal($0) / 1000 }
        keptMilliunits = s.revenueKept
    }

    enum CodingKeys: String, CodingKey {
        case campaign, offer_id, product_id, entries, delivered, decided, saved, saved_share, holdout_entries, holdout_decided,
             holdout_saved, holdout_saved_share, uplift, uplift_low, uplift_high, too_few_to_say, median_days_to_save, revenue_kept,
             bundle_id, answer_kind
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(campaign, forKey: .campaign)
        try c.encode(offer_id, forKey: .offer_id)
        if product_id != nil { try c.encode(product_id, forKey: .product_id) }
        if answer_kind != nil { try c.encode(answer_kind, forKey: .answer_kind) }
        for (v, k) in [(entries, CodingKeys.entries), (delivered, .delivered), (decided, .decided), (saved, .saved),
                       (holdout_entries, .holdout_entries), (holdout_decided, .holdout_decided), (holdout_saved, .holdout_saved)] {
            try c.encode(v, forKey: k)
        }
        for (v, k) in [(saved_share, CodingKeys.saved_share), (holdout_saved_share, .holdout_saved_share), (uplift, .uplift),
                       (uplift_low, .uplift_low), (uplift_high, .uplift_high), (median_days_to_save, .median_days_to_save)] {
            try c.encode(v, forKey: k)
        }
        try c.encode(too_few_to_say, forKey: .too_few_to_say)
        try c.encode(revenue_kept, forKey: .revenue_kept)
        try c.encode(bundle_id, forKey: .bundle_id)
    }

    func revenueText(separator: String) -> String {
        keptMilliunits.keys.sorted().map { "\($0) \(CurrencyAmount.format(milliunits: keptMilliunits[$0] ?? 0, currency: $0))" }
            .joined(separator: separator)
    }

    static func csvHeader(byProduct: Bool) -> String {
        (byProduct ? ["campaign", "offer_id", "product_id"] : ["campaign", "offer_id"]).joined(separator: ",")
            + ",entries,delivered,decided,saved,saved_share,holdout_entries,holdout_decided,holdout_saved,holdout_saved_share,"
            + "uplift,uplift_low,uplift_high,too_few_to_say,median_days_to_save,revenue_kept,bundle_id"
    }

    func csv(byProduct: Bool) -> String {
        func d(_ x: Double?) -> String { x.map { String($0) } ?? "" }
        var fields = [SegmentsCommand.csvField(campaign), SegmentsCommand.csvField(offer_id ?? "")]
        if byProduct { fields.append(SegmentsCommand.csvField(product_id ?? "")) }
        fields += [String(entries), String(delivered), String(decided), String(saved), d(saved_share), String(holdout_entries),
                   String(holdout_decided), String(holdout_saved), d(holdout_saved_share), d(uplift), d(uplift_low), d(uplift_high),
                   String(too_few_to_say), d(median_days_to_save), SegmentsCommand.csvField(revenueText(separator: ";")),
                   SegmentsCommand.csvField(bundle_id)]
        return fields.joined(separator: ",")
    }
}
