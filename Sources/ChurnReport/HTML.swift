import ChurnModel
import Foundation

/// A fragment of HTML (or SVG) markup. Escaping is by construction, as `PostgresQuery` binds by
/// construction: a `String` interpolated into an `HTML` literal is escaped, only another `HTML`
/// value is inserted as markup, so a database value cannot open a tag or leave an attribute.
///
///     let row: HTML = "<td>\(productId)</td>"        // productId escaped
///     let page: HTML = "<tr>\(row)</tr>"              // row inserted as markup
public struct HTML: Sendable, Equatable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public private(set) var markup: String

    public init(stringLiteral value: String) { markup = value }

    public init(stringInterpolation: Interpolation) { markup = stringInterpolation.markup }

    /// Markup known to be safe (literal text written in this module).
    init(trusted markup: String) { self.markup = markup }

    public var description: String { markup }

    public struct Interpolation: StringInterpolationProtocol {
        var markup = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            markup.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        public mutating func appendLiteral(_ literal: String) { markup += literal }

        /// Text: escaped for element content and quoted attribute values alike.
        public mutating func appendInterpolation(_ text: String) { markup += HTML.escape(text) }

        public mutating func appendInterpolation(_ html: HTML) { markup += html.markup }

        public mutating func appendInterpolation(_ parts: [HTML]) {
            for part in parts { markup += part.markup }
        }

        public mutating func appendInterpolation(_ n: Int) { markup += String(n) }

        /// A coordinate or length for SVG: at most two decimals, never exponent notation.
        public mutating func appendInterpolation(_ x: Double) { markup += HTML.number(x) }
    }

    /// Escapes `& < > " '` so text is inert in element content and in quoted attributes.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for ch in text.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\u{0}": out += "\u{FFFD}"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }

    /// `12.35`, `-3`, `0`: two decimals at most, for SVG attributes.
    public static func number(_ x: Double) -> String {
        guard x.isFinite else { return "0" }
        let rounded = (x * 100).rounded() / 100
        if rounded == rounded.rounded() { return String(Int(rounded)) }
        return String(format: "%.2f", rounded)
    }

    public static func + (lhs: HTML, rhs: HTML) -> HTML { HTML(trusted: lhs.markup + rhs.markup) }
}

extension Array where Element == HTML {
    public func joined() -> HTML { HTML(trusted: map(\.markup).joined()) }
}

/// Numbers as people read them in the page.
enum Format {
    /// `1,234,567`
    static func count(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, ch) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(ch)
        }
        return n < 0 ? "-" + out : out
    }

    /// `+12`, `-3`, `0`
    static func change(_ n: Int) -> String { n > 0 ? "+" + count(n) : count(n) }

    /// `42.0 %`; `–` when unknown.
    static func percent(_ share: Double?) -> String {
        guard let share else { return "–" }
        return String(format: "%.1f %%", share * 100)
    }

    /// Milliunits as an amount in the currency's minor units, thousands grouped: `1,234.50`, `JPY`'s `14,900`.
    static func amount(milliunits: Int64, currency: String?) -> String {
        CurrencyAmount.format(milliunits: milliunits, currency: currency, grouping: true)
    }

    /// `1 h 02 min`, `3 min 05 s`, `12.4 s`; `–` when unknown.
    static func duration(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0 else { return "–" }
        if seconds < 60 { return String(format: "%.1f s", seconds) }
        let s = Int(seconds.rounded())
        if s < 3600 { return String(format: "%d min %02d s", s / 60, s % 60) }
        return String(format: "%d h %02d min", s / 3600, (s % 3600) / 60)
    }

    /// `2026-11-21 02:00 UTC`
    static func time(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        return String(format: "%04d-%02d-%02d %02d:%02d UTC", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0, c.minute ?? 0)
    }
}
