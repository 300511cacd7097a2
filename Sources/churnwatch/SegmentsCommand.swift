import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

struct SegmentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "segments",
        abstract: "Show segment sizes now and their change since the previous recorded day.",
        discussion: """
            Sizes come from churnwatch.subscription_segments; every segment is listed, in the order of the contract, \
            zeros included. The change is against the latest day in churnwatch.segment_daily before today (UTC), or \
            before --day. --revenue prints revenue at risk instead (segment, currency, subscriptions, \
            revenue_at_risk in units with the currency's minor units, bundle_id; CSV with --csv). --csv prints segment,subscriptions,change,bundle_id (with \
            --by-product: segment,product_id,subscriptions,change,bundle_id); change is empty when there is no earlier day. \
            --cancel-page prints, per segment, the subscriptions whose last cancel-page view (churnwatch serve) is within \
            the 30 days up to --day (default now), and how many of them still renew (CSV: \
            segment,subscriptions,viewed_cancel_page,viewed_still_renewing,bundle_id).

            Several apps (every app in churnwatch.apps, or those given with --app): the table of each, after a line \
            "app BUNDLE_ID"; CSV: one header, then every app's rows, each naming its app in bundle_id.

            Exit codes: 0; 78 a bad value; 69 database unreachable.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    @Flag(name: .customLong("csv"), help: "Print CSV with a header instead of a table.")
    var csv = false

    @Flag(name: .customLong("by-product"), help: "One row per segment and product.")
    var byProduct = false

    @Flag(name: .customLong("revenue"), help: "Revenue at risk instead: the next renewal's price summed per segment and currency (will_not_renew, price_increase_pending, grace_period, billing_retry).")
    var revenue = false

    @Flag(name: .customLong("cancel-page"), help: "Per segment: subscriptions that viewed the cancel page in the 30 days up to --day, and those still renewing.")
    var cancelPage = false

    @Option(name: .customLong("day"), help: ArgumentHelp("Compare with the latest day before this one (YYYY-MM-DD or ISO 8601; default: today, UTC).", valueName: "day"))
    var day: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let day = try TimeArgument.parse(self.day, flag: "--day") ?? Date()
            let stores = try await app.readingStores(global)
            guard !stores.isEmpty else { throw AppOptions.noAppsYet }
            if cancelPage {
                var blocks: [(app: String, rows: [SegmentViews])] = []
                for store in stores { blocks.append((store.app, try await store.segmentCancelPageViews(asOf: day, days: 30))) }
                let lines = csv ? [Self.viewsCSVHeader] + blocks.flatMap { Self.viewsCSV($0.rows, app: $0.app) }
                                : PerAppText.lines(blocks.map { ($0.app, Self.viewsLines($0.rows)) })
                print(lines.joined(separator: "\n"))
                return
            }
            if revenue {
                var blocks: [(app: String, rows: [SegmentRevenue])] = []
                for store in stores { blocks.append((store.app, try await store.segmentRevenueAtRisk())) }
                let lines = csv ? [Self.revenueCSVHeader] + blocks.flatMap { Self.revenueCSV($0.rows, app: $0.app) }
                                : PerAppText.lines(blocks.map { ($0.app, Self.revenueLines($0.rows)) })
                print(lines.joined(separator: "\n"))
                return
            }
            var blocks: [(app: String, sizes: SegmentSizes)] = []
            for store in stores { blocks.append((store.app, try await store.segmentSizes(comparedBefore: day, byProduct: byProduct))) }
            let lines = csv ? [Self.csvHeader(byProduct: byProduct)] + blocks.flatMap { Self.csv($0.sizes, byProduct: byProduct, app: $0.app) }
                            : PerAppText.lines(blocks.map { ($0.app, Self.table($0.sizes, byProduct: byProduct)) })
            print(lines.joined(separator: "\n"))
        }
    }

    static func csvHeader(byProduct: Bool) -> String {
        byProduct ? "segment,product_id,subscriptions,change,bundle_id" : "segment,subscriptions,change,bundle_id"
    }

    /// One app's rows, `bundle_id` last.
    static func csv(_ sizes: SegmentSizes, byProduct: Bool, app: String) -> [String] {
        sizes.rows.map { row in
            var fields = [csvField(row.segment)]
            if byProduct { fields.append(csvField(row.productId ?? "")) }
            fields.append(String(row.subscriptions))
            fields.append(row.change.map(String.init) ?? "")
            fields.append(csvField(app))
            return fields.joined(separator: ",")
        }
    }

    /// RFC 4180: quoted when it holds a comma, quote or line break; quotes doubled.
    static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func table(_ sizes: SegmentSizes, byProduct: Bool) -> [String] {
        func change(_ n: Int?) -> String {
            guard let n else { return "n/a" }
            return n > 0 ? "+\(n)" : String(n)
        }
        let labels = sizes.rows.map { byProduct ? "\($0.segment) \($0.productId ?? "(none)")" : $0.segment }
        let width = max(28, (labels.map(\.count).max() ?? 0) + 2)
        func line(_ label: String, _ n: String, _ c: String) -> String {
            label.padding(toLength: width, withPad: " ", startingAt: 0) + n.leftPad(13) + c.leftPad(9)
        }
        var out = [line(byProduct ? "segment product" : "segment", "subscriptions", "change")]
        for (label, row) in zip(labels, sizes.rows) {
            out.append(line(label, String(row.subscriptions), change(row.change)))
        }
        out.append(line("total", String(sizes.total), change(sizes.previousTotal.map { sizes.total - $0 })))
        if let baseline = sizes.baselineDay {
            out.append("change since \(baseline)")
        } else {
            out.append("no earlier day in segment_daily to compare with")
        }
        return out
    }

    static let revenueCSVHeader = "segment,currency,subscriptions,revenue_at_risk,bundle_id"

    /// Revenue at risk of one app, CSV rows with `bundle_id` last (amounts in units, in each currency's minor units).
    static func revenueCSV(_ rows: [SegmentRevenue], app: String) -> [String] {
        rows.map { [$0.segment, $0.currency ?? "", String($0.subscriptions), amount($0.renewalPrice, $0.currency), app].map(csvField).joined(separator: ",") }
    }

    /// In the currency's own minor units (ISO 4217: JPY none, most two).
    static func amount(_ milli: Int64, _ currency: String?) -> String { CurrencyAmount.format(milliunits: milli, currency: currency) }

    /// Revenue at risk: one row per segment and currency (amounts in units, in each currency's minor units).
    static func revenueLines(_ rows: [SegmentRevenue]) -> [String] {
        var out = ["segment".padding(toLength: 28, withPad: " ", startingAt: 0) + "currency" + "subscriptions".leftPad(15) + "revenue at risk".leftPad(17)]
        for r in rows {
            out.append(r.segment.padding(toLength: 28, withPad: " ", startingAt: 0) + (r.currency ?? "(none)").padding(toLength: 8, withPad: " ", startingAt: 0)
                       + String(r.subscriptions).leftPad(15) + amount(r.renewalPrice, r.currency).leftPad(17))
        }
        if rows.isEmpty { out.append("no subscription at risk") }
        return out
    }

    static let viewsCSVHeader = "segment,subscriptions,viewed_cancel_page,viewed_still_renewing,bundle_id"

    static func viewsCSV(_ rows: [SegmentViews], app: String) -> [String] {
        rows.map { [$0.segment, String($0.subscriptions), String($0.viewed), String($0.viewedStillRenewing), app].map(csvField).joined(separator: ",") }
    }

    /// The cancel page's views per segment (last view within 30 days).
    static func viewsLines(_ rows: [SegmentViews]) -> [String] {
        func line(_ a: String, _ b: String, _ c: String, _ d: String) -> String {
            a.padding(toLength: 28, withPad: " ", startingAt: 0) + b.leftPad(13) + c.leftPad(22) + d.leftPad(15)
        }
        var out = [line("segment", "subscriptions", "viewed cancel page 30d", "still renewing")]
        for r in rows { out.append(line(r.segment, String(r.subscriptions), String(r.viewed), String(r.viewedStillRenewing))) }
        out.append(line("total", String(rows.reduce(0) { $0 + $1.subscriptions }), String(rows.reduce(0) { $0 + $1.viewed }),
                        String(rows.reduce(0) { $0 + $1.viewedStillRenewing })))
        return out
    }
}
