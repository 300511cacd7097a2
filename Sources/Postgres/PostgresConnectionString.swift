import CLibPQ
import Foundation

/// Checks a connection string before connecting, so a malformed one is told apart from an
/// unreachable server.
public enum PostgresConnectionString {
    /// Why `text` is not a usable libpq connection string (`host=... dbname=...`) or
    /// `postgresql://` URL, or nil when it is one (empty counts as one: libpq's environment
    /// defaults). The reason never quotes the text, which may hold a password.
    public static func problem(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty { return nil }
        let lower = trimmed.lowercased()
        let isURI = lower.hasPrefix("postgresql://") || lower.hasPrefix("postgres://")
        if !isURI {
            if lower.contains("://") {
                return "its scheme is not postgresql:// or postgres://"
            }
            // libpq would take text without "=" as a database name on the default server.
            guard trimmed.contains("=") else {
                return "it is neither key=value pairs nor a postgresql:// URL"
            }
        }
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(trimmed, &error) else {
            defer { if let error { PQfreemem(error) } }
            let message = error.map { String(cString: $0) } ?? "it cannot be parsed"
            return redacted(message)
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "port", let value = option.pointee.val {
                let ports = String(cString: value).split(separator: ",", omittingEmptySubsequences: false)
                for port in ports where !port.isEmpty {
                    guard let n = Int(port), (1...65_535).contains(n) else {
                        return "its port is not a number from 1 to 65535"
                    }
                }
            }
            option += 1
        }
        return nil
    }

    /// libpq's message, first line, without the quoted parts (they repeat the text).
    static func redacted(_ message: String) -> String {
        let line = message.split(separator: "\n").first.map(String.init) ?? message
        var out = ""
        var inQuote = false
        for ch in line {
            if ch == "\"" {
                if inQuote { out += "\"…\"" }
                inQuote.toggle()
            } else if !inQuote {
                out.append(ch)
            }
        }
        return out.trimmingCharacters(in: .whitespaces)
    }
}
