import Foundation

/// An error from PostgreSQL or from this layer, safe to log.
///
/// The description names the kind, the SQLSTATE, the server's primary message and the start of
/// the statement (statements only ever contain `$n` placeholders, never values). Bound parameter
/// values are never part of it: the server's DETAIL (which can quote a row) is dropped, and
/// quoted values in data-exception messages are redacted.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a caller decides on it.
    public enum Kind: String, Sendable {
        /// The server could not be reached or refused the connection at start.
        case connectionFailed
        /// An established connection broke (server restart, terminated backend, network).
        /// Reconnect; a transaction that was open did not commit.
        case connectionLost
        /// SQLSTATE 23505.
        case uniqueViolation
        /// SQLSTATE 40001: retry the transaction.
        case serializationFailure
        /// SQLSTATE 40P01: retry the transaction.
        case deadlockDetected
        /// SQLSTATE 57014: statement timeout or cancel.
        case queryCanceled
        /// A result value did not fit the Swift type asked for.
        case decoding
        /// The caller used the API wrongly (a NUL byte in text, a column that does not exist).
        case usage
        /// Any other server error; see `sqlState`.
        case server
    }

    public var kind: Kind
    /// The five-character SQLSTATE, when the server sent one.
    public var sqlState: String?
    /// A short, value-free message.
    public var message: String
    /// The first characters of the statement, for context (placeholders only).
    public var statement: String?

    public init(kind: Kind, sqlState: String? = nil, message: String, statement: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.statement = statement.map(Self.abbreviate)
    }

    /// True for failures that a retried transaction can get past.
    public var isRetryable: Bool {
        switch kind {
        case .serializationFailure, .deadlockDetected, .connectionLost: return true
        default: return false
        }
    }

    public var description: String {
        var text = "postgres \(kind.rawValue)"
        if let sqlState { text += " [\(sqlState)]" }
        text += ": \(message)"
        if let statement { text += " (in: \(statement))" }
        return text
    }

    static func abbreviate(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: { $0 == "\n" || $0 == "\t" || $0 == " " }).joined(separator: " ")
        return flat.count > 80 ? String(flat.prefix(77)) + "..." : flat
    }

    /// Classifies a SQLSTATE into a kind.
    static func kind(forSQLState state: String) -> Kind {
        switch state {
        case "23505": return .uniqueViolation
        case "40001": return .serializationFailure
        case "40P01": return .deadlockDetected
        case "57014": return .queryCanceled
        case "57P01", "57P02", "57P03": return .connectionLost
        default:
            return state.hasPrefix("08") ? .connectionLost : .server
        }
    }

    /// Removes values a server message may quote. Data exceptions (class 22) quote the
    /// offending input (`invalid input syntax for type integer: "abc"`); other classes keep
    /// values in DETAIL, which is never read.
    static func redact(message: String, sqlState: String?) -> String {
        guard let sqlState, sqlState.hasPrefix("22") else { return message }
        var out = ""
        var inQuote = false
        for ch in message {
            if ch == "\"" {
                if inQuote { out += "\"…\"" }
                inQuote.toggle()
            } else if !inQuote {
                out.append(ch)
            }
        }
        if inQuote { out += "\"…" }
        return out
    }
}
