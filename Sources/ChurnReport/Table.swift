/// The table under every chart: the same numbers, readable by screen readers and copyable into a
/// spreadsheet. Each row starts with a header cell naming it; the rest are right-aligned figures.
struct Table {
    var id: String
    var caption: String
    var headers: [String]
    /// Each row's header cell (text, or a link) and its figures.
    var rows: [(key: HTML, cells: [String])] = []
    /// A closing row (totals), optional.
    var footer: (key: String, cells: [String])?

    init(id: String, caption: String, headers: [String]) {
        self.id = id
        self.caption = caption
        self.headers = headers
    }

    /// Past this many rows a table scrolls within a box on screen (in full when printed).
    static let longRows = 12

    mutating func add(_ key: String, _ cells: [String]) {
        let text: HTML = "\(key)"
        rows.append((text, cells))
    }

    /// A row whose header cell links to `anchor`, an element id of the page.
    mutating func add(_ key: String, linkingTo anchor: String, _ cells: [String]) {
        let link: HTML = "<a href=\"#\(anchor)\">\(key)</a>"
        rows.append((link, cells))
    }

    var html: HTML {
        let head = headers.enumerated().map { i, h -> HTML in
            i == 0 ? "<th scope=\"col\">\(h)</th>" : "<th scope=\"col\" class=\"num\">\(h)</th>"
        }
        func row(_ r: (key: HTML, cells: [String])) -> HTML {
            let cells = r.cells.map { c -> HTML in "<td class=\"num\">\(c)</td>" }
            return "<tr><th scope=\"row\">\(r.key)</th>\(cells)</tr>"
        }
        let foot: HTML = footer.map { f -> HTML in
            let key: HTML = "\(f.key)"
            return "<tfoot>\(row((key, f.cells)))</tfoot>"
        } ?? ""
        return """
            <div class="\(rows.count > Self.longRows ? "scroll long" : "scroll")"><table id="\(id)"><caption>\(caption)</caption><thead><tr>\(head)</tr></thead>\
            <tbody>\(rows.map(row))</tbody>\(foot)</table></div>
            """
    }
}
