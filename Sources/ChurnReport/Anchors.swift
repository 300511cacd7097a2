/// The element ids of one app's part of the page. A page of one app uses the panels' ids as
/// they are (`segments`, `t-events`, ...); a page of several apps prefixes each app's with the
/// app's slug and `_` (`com.example.a_segments`), so every id on the page is unique: a slug holds
/// no `_`, and the ids of the page's own parts (`apps`, `t-apps`) hold none either.
struct Anchors: Sendable, Equatable {
    /// "" on a page of one app; `SLUG_` for one app of several.
    var prefix = ""
    /// The app's bundle id on a page of several apps; nil on a page of one.
    var app: String?

    /// The ids of a page of one app.
    static let single = Anchors()

    /// The id `name` of this app's part of the page.
    func callAsFunction(_ name: String) -> String { prefix + name }

    /// The label of the app's list of links to its panels.
    var panelsLabel: String { app.map { "Panels of \($0)" } ?? "Panels" }

    /// One `Anchors` per app, in order: each prefix the app's bundle id with every character
    /// other than a letter, digit, `.` or `-` made `-` (an empty one `app`), then `-2`, `-3`...
    /// when another app already has that slug.
    static func forApps(_ bundleIds: [String]) -> [Anchors] {
        var used: Set<String> = []
        return bundleIds.map { bundleId in
            let base = slug(bundleId)
            var candidate = base
            var n = 1
            while used.contains(candidate) {
                n += 1
                candidate = "\(base)-\(n)"
            }
            used.insert(candidate)
            return Anchors(prefix: candidate + "_", app: bundleId)
        }
    }

    static func slug(_ bundleId: String) -> String {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-".unicodeScalars)
        let scalars = bundleId.unicodeScalars.map { allowed.contains($0) ? Character($0) : "-" }
        return scalars.isEmpty ? "app" : String(scalars)
    }
}
