import AppStoreModels
import Foundation

/// What ``Inspector`` found: a JSON document with every decoded field and a verdict.
///
/// Print ``json`` to standard output and ``verdictLine`` to standard error, and exit with
/// ``exitCode``.
public struct InspectionReport: Sendable {
    public enum Verdict: String, Sendable, Hashable {
        /// Every signed payload verified.
        case verified
        /// Something failed verification or could not be decoded; ``InspectionReport/reason`` says what.
        case rejected
        /// Apple knows no such transaction (in either environment).
        case notFound = "not_found"
        /// Apple could not be asked: rate limited, temporary failure or the API key was refused.
        case unavailable
    }

    public var verdict: Verdict
    /// The first problem, when not verified.
    public var reason: String?
    /// The whole report, including `verdict` and `reason`.
    public var document: JSONValue
    /// Process exit status: 0 verified; 1 rejected or not found; 69 Apple unavailable;
    /// 78 Apple refused the API key (configuration).
    public var exitCode: Int32

    /// The report as pretty-printed JSON with sorted keys.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(document)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// One human line: `verdict: verified (3 signed payloads)` or `verdict: rejected: <reason>`.
    public var verdictLine: String {
        switch verdict {
        case .verified: "verdict: verified (\(signedCount) signed payload\(signedCount == 1 ? "" : "s"))"
        default: "verdict: \(verdict.rawValue): \(reason ?? "unknown")"
        }
    }

    var signedCount: Int {
        guard case .object(let o) = document, case .integer(let n)? = o["signedPayloads"] else { return 0 }
        return Int(n)
    }
}
