import ChurnStore
import Foundation

/// What the reading commands (report, status, segments, outcomes, refunds) share when they show
/// several apps: the apps to read, and how their text is laid out.
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
