import Foundation

/// Debian's `chromium`, headless: the DOM a page parses into, its console messages, and
/// screenshots. Waits run on a thread of their own (`OwnThread`), each bounded by a timeout.
struct HeadlessChromium {
    let binary: String

    /// The browser, or nil with the reason it cannot be had (the test prints it and skips).
    static func find() -> (HeadlessChromium?, String) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
                let path = "\(dir)/\(name)"
                if FileManager.default.isExecutableFile(atPath: path) { return (HeadlessChromium(binary: path), path) }
            }
        }
        return (nil, "no chromium on PATH (Debian: apt-get install chromium; ops/test and .ci/run install it as root)")
    }

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs chromium headless with a throwaway profile and `arguments`, killed after `timeout`.
    func run(_ arguments: [String], timeout: TimeInterval = 90) async throws -> Output {
        let binary = self.binary
        return try await OwnThread.run {
            let profile = FileManager.default.temporaryDirectory.appendingPathComponent("cw-chromium-\(UUID().uuidString.prefix(8))")
            defer { try? FileManager.default.removeItem(at: profile) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            // --no-sandbox: tests run as root in CI; the page is our own file and has no script.
            process.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                                 "--hide-scrollbars", "--user-data-dir=\(profile.path)"] + arguments
            var env = ProcessInfo.processInfo.environment
            env["HOME"] = profile.path
            process.environment = env
            // Output goes to files: nothing to drain while waiting, whatever the browser prints.
            try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
            let outURL = profile.appendingPathComponent("stdout"), errURL = profile.appendingPathComponent("stderr")
            guard FileManager.default.createFile(atPath: outURL.path, contents: nil),
                  FileManager.default.createFile(atPath: errURL.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: profile.path])
            }
            process.standardOutput = try FileHandle(forWritingTo: outURL)
            process.standardError = try FileHandle(forWritingTo: errURL)
            process.standardInput = FileHandle.nullDevice
            try CLIRunner.spawn(process)
            let status = ChildExit.wait(for: process, killingAfter: timeout).status
            return Output(status: status, stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                          stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "")
        }
    }

    /// The DOM of `file` after parsing, and the browser's log (console messages appear there as
    /// `CONSOLE` lines).
    func dumpDOM(_ file: URL) async throws -> Output {
        try await run(["--enable-logging=stderr", "--v=0", "--dump-dom", file.absoluteString])
    }

    /// A PNG of the page's first `height` pixels at `width` CSS pixels.
    func screenshot(_ file: URL, to png: URL, width: Int, height: Int) async throws -> Output {
        try await run(["--window-size=\(width),\(height)", "--screenshot=\(png.path)", file.absoluteString])
    }
}

/// The tables of a report page as the browser parsed them: rows by their header cell.
struct ParsedTable {
    var headers: [String]
    var rows: [(key: String, cells: [String])]
    var footer: [String]?

    /// The table with `id` in `dom`; nil when absent.
    init?(id: String, in dom: String) {
        guard let start = dom.range(of: "<table id=\"\(id)\">"),
              let end = dom.range(of: "</table>", range: start.upperBound..<dom.endIndex) else { return nil }
        let table = String(dom[start.upperBound..<end.lowerBound])
        headers = Self.matches(#"<th scope="col"[^>]*>(.*?)</th>"#, in: table).map { Self.text($0[0]) }
        let bodyStart = table.range(of: "<tbody>")?.upperBound ?? table.startIndex
        let bodyEnd = table.range(of: "</tbody>")?.lowerBound ?? table.endIndex
        let body = String(table[bodyStart..<bodyEnd])
        rows = Self.matches(#"<tr><th scope="row">(.*?)</th>(.*?)</tr>"#, in: body).map { m in
            (Self.text(m[0]), Self.matches(#"<td class="num">(.*?)</td>"#, in: m[1]).map { Self.text($0[0]) })
        }
        if let foot = table.range(of: "<tfoot>") {
            footer = Self.matches(#"<td class="num">(.*?)</td>"#, in: String(table[foot.upperBound...])).map { Self.text($0[0]) }
        }
    }

    /// A figure cell as a number: `1,234` → 1234, `+5` → 5; nil for `–`.
    static func number(_ cell: String) -> Int? { Int(cell.replacingOccurrences(of: ",", with: "").replacingOccurrences(of: "+", with: "")) }

    /// The cell of row `key` under column `header`.
    func cell(_ key: String, _ header: String) -> String? {
        guard let row = rows.first(where: { $0.key == key }), let col = headers.firstIndex(of: header), col >= 1 else { return nil }
        return row.cells.indices.contains(col - 1) ? row.cells[col - 1] : nil
    }

    static func text(_ html: String) -> String {
        html.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&nbsp;", with: " ").replacingOccurrences(of: "&amp;", with: "&")
    }

    static func matches(_ pattern: String, in text: String) -> [[String]] {
        let regex = try! NSRegularExpression(pattern: pattern, options: [.dotMatchesLineSeparators])
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { m in
            (1..<m.numberOfRanges).map { String(text[Range(m.range(at: $0), in: text)!]) }
        }
    }
}
