/// The page's only style sheet, inline. System fonts (nothing loaded), fluid charts (the SVG
/// viewBox scales to the column), wide tables scroll sideways on phones, and in print charts are
/// never split across pages and tables show in full, in small type.
enum Style {
    static let css = """
        :root{--ink:#1d1d1f;--muted:#5b5b60;--line:#d8d8dc;--panel:#ffffff;--page:#f4f4f6;--accent:#332288}
        *{box-sizing:border-box}
        body{margin:0;background:var(--page);color:var(--ink);font:15px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
        main{max-width:1080px;margin:0 auto;padding:16px}
        header h1{font-size:1.6rem;margin:.2em 0}
        .meta{color:var(--muted);margin:.2em 0 1em}
        nav ul{list-style:none;padding:0;margin:0 0 12px;display:flex;flex-wrap:wrap;gap:6px 14px}
        nav a{color:var(--accent)}
        .panel{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin:0 0 16px}
        .panel h2{font-size:1.25rem;margin:0 0 .3em}
        .panel h3{font-size:1rem;margin:1em 0 .3em}
        .lead{margin:.2em 0 .8em}
        .nothing{color:var(--muted);font-style:italic}
        .kpis{display:flex;flex-wrap:wrap;gap:10px;margin:.4em 0 .8em;padding:0;list-style:none}
        .kpis li{border:1px solid var(--line);border-radius:6px;padding:6px 12px;min-width:130px}
        .kpis b{display:block;font-size:1.35rem}
        .kpis span{color:var(--muted);font-size:.85rem}
        .chartbox{overflow-x:auto;margin:4px 0}
        svg.chart{width:100%;min-width:540px;height:auto;display:block}
        svg.chart text{font-family:inherit;font-size:13px;fill:var(--ink)}
        svg.chart text.axis{fill:var(--muted);font-size:12px}
        svg.chart .grid{stroke:#e6e6ea;stroke-width:1}
        svg.chart .zero{stroke:#777;stroke-width:1}
        svg.chart .net{fill:#ffffff;stroke:#000000;stroke-width:1.5}
        .legend{list-style:none;padding:0;margin:4px 0 8px;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:.85rem}
        .swatch{display:inline-block;width:12px;height:12px;border:1px solid #0003;margin-right:5px;vertical-align:-1px}
        .tables{display:flex;flex-wrap:wrap;gap:4px 32px;align-items:flex-start}
        .tables>div{max-width:100%}
        .scroll{overflow-x:auto;margin:6px 0 4px}
        .scroll.long{max-height:24em;overflow-y:auto;border-bottom:1px solid var(--line)}
        .scroll.long thead th{position:sticky;top:0;background:var(--panel)}
        table{border-collapse:collapse;font-size:.85rem;min-width:50%}
        caption{text-align:left;color:var(--muted);padding:2px 0 4px;font-size:.85rem}
        th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;white-space:nowrap}
        .num{text-align:right;font-variant-numeric:tabular-nums}
        thead th{border-bottom:2px solid #999}
        tfoot th,tfoot td{font-weight:600;border-top:2px solid #999}
        code{background:#eeeef2;padding:0 4px;border-radius:3px}
        footer{color:var(--muted);font-size:.85rem}
        @media (max-width:600px){main{padding:8px}.panel{padding:10px}header h1{font-size:1.3rem}.kpis li{min-width:44%}
        table{font-size:.78rem}th,td{padding:3px 4px}}
        @media print{body{background:#fff;font-size:10pt}main{max-width:none;padding:0}nav{display:none}
        .panel{border:none;border-top:1px solid #999;border-radius:0;padding:8px 0}
        .chartbox,.kpis,tr{break-inside:avoid}h2,h3,caption{break-after:avoid}
        table{font-size:7.5pt}th,td{padding:1px 4px}thead th{white-space:normal;word-break:break-all}
        .scroll,.chartbox{overflow:visible}.scroll.long{max-height:none}.scroll.long thead th{position:static}svg.chart{min-width:0;max-height:9cm}}
        """

    /// Added on a page of several apps only (a page of one app is the same as before apps were kept).
    static let apps = """

        .app{border-top:4px solid var(--accent);margin:28px 0 0;padding-top:6px}
        .app-title{font-size:1.5rem;margin:.2em 0;overflow-wrap:anywhere}
        .app>.meta a{color:var(--accent)}
        #t-apps th:last-child,#t-apps td:last-child{text-align:left}
        @media print{.app{break-before:page}}
        """
}
