import ChurnModel

/// The report of several apps in one page: an app selector first (each app's figures at a
/// glance, linking to its section), then each app's section, headed by its bundle id, with
/// every panel of a one-app page. Ids are prefixed per app (`Anchors`).
extension ReportPage {
    /// One app's data: the page of `render(_:)`, unchanged. Several (the same `asOf` and `days`,
    /// in the order given): the selector, then one section per app. At least one.
    public static func render(apps: [ReportData]) -> String {
        precondition(!apps.isEmpty, "a report shows at least one app")
        guard apps.count > 1 else { return render(apps[0]) }
        let first = apps[0]
        let anchors = Anchors.forApps(apps.map(\.app))
        let total = apps.reduce(0) { $0 + $1.subscriptions }
        let meta: HTML = """
            As of <strong>\(Format.time(first.asOf))</strong> · the last \(days(first)) · \
            \(apps.count) apps, \(Format.count(total)) subscriptions registered
            """
        let sections = zip(apps, anchors).map { appSection($0, $1) }
        let body: HTML = """
            \(AppSelector.render(apps, anchors))
            \(sections)
            """
        return document(first, meta: meta, body: body, css: Style.css + Style.apps)
    }

    /// The name an app is shown by.
    static func appName(_ data: ReportData) -> String { data.app.isEmpty ? "(no app)" : data.app }

    /// One app's section: its bundle id as heading, its subscriptions, then its panels.
    static func appSection(_ data: ReportData, _ ids: Anchors) -> HTML {
        """
        <section class="app" id="\(ids("app"))" data-app="\(data.app)"><h2 class="app-title">\(appName(data))</h2>\
        <p class="meta">\(Format.count(data.subscriptions)) subscriptions registered · <a href="#apps">all apps</a></p>
        \(body(data, ids))
        </section>

        """
    }
}

/// The selector of a page of several apps: one row per app with its subscriptions, those at
/// risk, those in billing trouble and its last run, each linking to the app's section.
enum AppSelector {
    /// The segments counted "at risk": active, and the customer has not agreed to renew.
    static let atRisk = [Segment.willNotRenew.rawValue, Segment.priceIncreasePending.rawValue]

    static func render(_ apps: [ReportData], _ anchors: [Anchors]) -> HTML {
        var table = Table(id: "t-apps", caption: """
            Per app: subscriptions registered; at risk (will_not_renew and price_increase_pending on the newest day \
            recorded); in billing trouble now (grace period or billing retry); its last run
            """, headers: ["app", "subscriptions", "at risk", "billing trouble", "last run"])
        for (data, ids) in zip(apps, anchors) {
            table.add(ReportPage.appName(data), linkingTo: ids("app"),
                      [Format.count(data.subscriptions), atRisk(data).map(Format.count) ?? "–",
                       Format.count(data.billing.inGrace + data.billing.inRetry), lastRun(data)])
        }
        table.footer = ("total", [Format.count(apps.reduce(0) { $0 + $1.subscriptions }),
                                  Format.count(apps.reduce(0) { $0 + (atRisk($1) ?? 0) }),
                                  Format.count(apps.reduce(0) { $0 + $1.billing.inGrace + $1.billing.inRetry }), ""])
        let lead: HTML = "\(apps.count) apps on this page; each app's section below has every panel for that app alone."
        return """
            <section class="panel" id="apps" data-panel="apps"><h2>Apps</h2><p class="lead">\(lead)</p>\(table.html)</section>
            """
    }

    /// Subscriptions at risk on the app's newest recorded day; nil before any day was recorded.
    static func atRisk(_ data: ReportData) -> Int? {
        data.segmentDays.last.map { day in atRisk.reduce(0) { $0 + (day.sizes[$1] ?? 0) } }
    }

    /// "run 7: done, as of 2026-10-07 02:00 UTC", or "no run yet".
    static func lastRun(_ data: ReportData) -> String {
        guard let run = data.runs.first else { return "no run yet" }
        return "run \(run.id): \(run.status), as of \(Format.time(run.asOf))"
    }
}
