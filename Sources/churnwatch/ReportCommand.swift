import ArgumentParser
import ChurnReport
import ChurnStore
import Foundation

struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Write the retention team's morning report: one self-contained HTML page.",
        discussion: """
            Panels: segment sizes over the days, events per day and auto-renew flips, moves between segments \
            (7 and 30 days), billing trouble and the share recovered by day since the first failure, the win-back \
            queue, revenue at risk (when renewal prices are stored), the last runs. Every chart has its numbers in a \
            table. The page has no script and loads nothing: it can be mailed, printed or put on an internal page. \
            An empty or new database gives a page that says so. Prints the file's path.

            Several apps (every app in churnwatch.apps, or those given with --app): an app selector first (each \
            app's subscriptions, those at risk, billing trouble and last run, linking to its section), then one \
            section per app, headed by its bundle id, with every panel for that app alone. One app: the page as it \
            always was.

            Exit codes: 0 written; 78 a bad value, a file that cannot be written, or a schema behind this build; \
            69 database unreachable.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    @Option(name: .customLong("out"), help: ArgumentHelp("The HTML file to write (default: churnwatch-report-DAY.html in the current directory).", valueName: "file"))
    var out: String?

    @Option(name: .customLong("days"), help: ArgumentHelp("Days of history in the charts, ending with the as-of day (1-366).", valueName: "n"))
    var days: Int = 30

    @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment the report describes (ISO 8601; default: now).", valueName: "time"))
    var asOf: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            guard (1...366).contains(days) else {
                throw CLIError.configuration("--days \(days) is out of range: give a number of days from 1 to 366")
            }
            let asOf = try TimeArgument.parse(self.asOf, flag: "--as-of") ?? Date()
            let path = out ?? "churnwatch-report-\(asOf.ISO8601Format(.iso8601.year().month().day())).html"
            let database = DatabaseStore.open(try global.resolvedDatabaseURL())
            // Every app selected, each read in its own snapshot; a database with no app yet (or
            // no schema) gives the one page that says so.
            var pages: [ReportData] = []
            for record in try app.selected(from: try await database.appsList()) {
                pages.append(ReportData(try await database.scoped(to: record).reportRows(asOf: asOf, days: days)))
            }
            if pages.isEmpty {
                var none = ReportData(asOf: asOf, days: days)
                none.migrated = try await database.schemaPresent()
                pages = [none]
            }
            let html = ReportPage.render(apps: pages)
            let url = URL(fileURLWithPath: path)
            do {
                // A regular file is replaced whole (a reader never sees half a page); anything else that
                // exists (a device such as /dev/null, a pipe, a symlink) is written into, never replaced.
                try Data(html.utf8).write(to: url, options: isReplaceable(path) ? .atomic : [])
            } catch {
                throw CLIError.configuration("--out \(path) cannot be written: \((error as NSError).localizedDescription) (choose another file)")
            }
            print(url.standardizedFileURL.path)
        }
    }
}

/// True when `path` may be replaced by renaming a new file over it: it does not exist, or it is a
/// regular file. A device, a pipe or a symlink must be written into instead (renaming over
/// /dev/null as root would turn it into a file).
func isReplaceable(_ path: String) -> Bool {
    var info = stat()
    guard lstat(path, &info) == 0 else { return true }
    return (info.st_mode & S_IFMT) == S_IFREG
}
