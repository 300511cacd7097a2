import ChurnStore
import Foundation

/// What the reading commands (report, status, segments, outcomes, refunds) share when they show
/// several apps: which stores, and how their text is laid out.
extension AppOptions {
    /// `readingStores`, but never none: a database with no app at all (nothing configured it,
    /// and no `APPSTORE_BUNDLE_ID`) gives one store of no app (`""`), whose reads find nothing,
    /// so the command says "no runs yet" or shows zeros as it did before apps were kept.
    func readingStoresOrNone(_ global: GlobalOptions) async throws -> [ChurnStore] {
        let all = ChurnStore.open(try global.resolvedDatabaseURL(), app: "")
        try await all.schemaCheck()
        return try await forReading(all).nonEmpty.map { all.scoped(to: $0) }
    }
}

extension Array where Element == String {
    /// The apps to read, or the one app "" when there are none.
    var nonEmpty: [String] { isEmpty ? [""] : self }
}

/// Text output of several apps: each app's lines after a line naming it, an empty line between
/// apps; one app's lines as they are (the output of a single-app deployment does not change).
enum PerAppText {
    /// `headed`: name each app (default: when there are several blocks).
    static func lines(_ blocks: [(app: String, lines: [String])], headed: Bool? = nil) -> [String] {
        guard headed ?? (blocks.count > 1) else { return blocks.flatMap(\.lines) }
        return blocks.enumerated().flatMap { i, block in
            (i == 0 ? [] : [""]) + [heading(block.app)] + block.lines
        }
    }

    /// The line before an app's block: `app com.example.a`.
    static func heading(_ app: String) -> String { "app \(app)" }
}
