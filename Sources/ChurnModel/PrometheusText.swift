import Foundation

/// Prometheus' text exposition format (version 0.0.4), built line by line: `run`'s metrics file
/// and `serve`'s `/metrics`.
public struct PrometheusText: Sendable {
    public enum Kind: String { case gauge, counter, histogram }
    /// Families in the order first seen, each with its HELP and TYPE lines and its samples:
    /// a family's samples stay together whichever app added them.
    private var families: [(name: String, lines: String)] = []

    public init() {}
    /// Labels every sample gets first (the app's).
    public var labels: [(String, String)] = []

    public var text: String { families.map(\.lines).joined() }

    public mutating func family(_ name: String, _ kind: Kind, _ help: String) {
        guard !families.contains(where: { $0.name == name }) else { return }
        families.append((name, "# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"))
    }

    public mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        var line = name
        let all = self.labels + labels
        if !all.isEmpty {
            line += "{" + all.map { "\($0.0)=\"\(Self.escapeLabelValue($0.1))\"" }.joined(separator: ",") + "}"
        }
        line += " " + Self.format(value) + "\n"
        if let i = families.lastIndex(where: { $0.name == name }) { families[i].lines += line } else { families.append((name, line)) }
    }

    /// Label values: backslash, double quote and line feed escaped.
    public static func escapeLabelValue(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// HELP text: backslash and line feed escaped.
    public static func escapeHelp(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }

    /// Whole numbers without a fraction; others with millisecond precision.
    public static func format(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        if v == v.rounded(), abs(v) < 1e15 { return String(Int64(v)) }
        return String(format: "%.3f", v)
    }
}
