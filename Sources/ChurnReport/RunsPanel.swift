/// Panel 7: the last runs: due, polled, failed, Apple calls per endpoint, duration, 429s.
enum RunsPanel {
    static func render(_ data: ReportData, _ ids: Anchors = .single) -> HTML {
        let runs = data.runs
        guard !runs.isEmpty else {
            return ReportPage.panel("runs", ids, lead: "No run yet.", ReportPage.nothing("<code>churnwatch run</code> (cron, systemd) starts one each night."))
        }
        let endpoints = Array(Set(runs.flatMap { $0.calls.keys })).sorted()
        let oldestFirst = Array(runs.reversed())
        let chart = Chart.stackedBars(Frame(width: 720, height: 200), categories: oldestFirst.map { "run \($0.id)" },
                                      series: [Series(name: "polled", color: "#44AA99", values: oldestFirst.map { Double($0.polled) }),
                                               Series(name: "failed", color: "#CC6677", values: oldestFirst.map { Double($0.failed) }),
                                               Series(name: "not finished", color: "#DDDDDD",
                                                      values: oldestFirst.map { Double(max($0.due - $0.polled - $0.failed, 0)) })],
                                      label: "Subscriptions due per run: polled, failed, not finished")
        var table = Table(id: ids("t-runs"), caption: "The last runs, newest first (429s: – when the run's workers recorded no count)",
                          headers: ["run", "kind", "as of", "status", "due", "polled", "failed"] + endpoints.map { "calls: \($0)" } + ["429s", "duration"])
        for r in runs {
            table.add(String(r.id), [r.kind, Format.time(r.asOf), r.status, Format.count(r.due), Format.count(r.polled), Format.count(r.failed)]
                      + endpoints.map { Format.count(r.calls[$0] ?? 0) } + [r.http429.map(Format.count) ?? "–", Format.duration(r.durationSeconds)])
        }
        let last = runs[0]
        let lead: HTML = """
            Run \(String(last.id)) (\(last.kind), as of \(Format.time(last.asOf))) is \(last.status): \(Format.count(last.due)) due, \
            \(Format.count(last.polled)) polled, \(Format.count(last.failed)) failed in \(Format.duration(last.durationSeconds)).
            """
        return ReportPage.panel("runs", ids, lead: lead, """
            \(chart)\(Chart.legend([("polled", "#44AA99"), ("failed", "#CC6677"), ("not finished", "#DDDDDD")]))\(table.html)
            """)
    }
}
