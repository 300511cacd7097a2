import Foundation

/// A SQL statement whose interpolated values become `$n` placeholders plus binds.
///
/// ```swift
/// let q: PostgresQuery = "SELECT * FROM churnwatch.subscriptions WHERE original_transaction_id = \(otid)"
/// // sql: "... = $1", binds: [otid]
/// ```
///
/// Interpolation only accepts `PostgresEncodable` values, identifiers (quoted) and other
/// queries (whose placeholders are renumbered), so a value can never become SQL text.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    @usableFromInline
    enum Part: Sendable {
        case sql(String)
        case bind(Int)
    }

    var parts: [Part]
    /// The bound values, in placeholder order.
    public private(set) var binds: [PostgresBind]

    public init(stringLiteral value: String) {
        parts = [.sql(value)]
        binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        parts = stringInterpolation.parts
        binds = stringInterpolation.binds
    }

    /// The statement text with `$1`, `$2`, ... placeholders.
    public var sql: String {
        var text = ""
        text.reserveCapacity(64)
        for part in parts {
            switch part {
            case .sql(let s): text += s
            case .bind(let i): text += "$\(i + 1)"
            }
        }
        return text
    }

    public var description: String { sql }

    /// Appends another query; its binds follow this query's binds.
    public mutating func append(_ other: PostgresQuery) {
        let offset = binds.count
        for part in other.parts {
            switch part {
            case .sql(let s): parts.append(.sql(s))
            case .bind(let i): parts.append(.bind(i + offset))
            }
        }
        binds.append(contentsOf: other.binds)
    }

    public static func + (lhs: PostgresQuery, rhs: PostgresQuery) -> PostgresQuery {
        var q = lhs
        q.append(rhs)
        return q
    }

    /// Joins queries with a separator (for value lists built at run time).
    public static func joined(_ queries: [PostgresQuery], separator: String) -> PostgresQuery {
        var out: PostgresQuery = ""
        for (i, q) in queries.enumerated() {
            if i > 0 { out.append(PostgresQuery(stringLiteral: separator)) }
            out.append(q)
        }
        return out
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        @usableFromInline var parts: [Part] = []
        @usableFromInline var binds: [PostgresBind] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            parts.reserveCapacity(interpolationCount * 2 + 1)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            parts.append(.sql(literal))
        }

        /// A value: becomes `$n`. Inlinable, so that a caller's concrete types reach the
        /// encoding (an array of thousands of values is encoded specialized, not generically).
        @inlinable
        public mutating func appendInterpolation<T: PostgresEncodable>(_ value: T) {
            parts.append(.bind(binds.count))
            binds.append(value.postgresBind)
        }

        /// An optional value: `$n`, bound as NULL when nil.
        @inlinable
        public mutating func appendInterpolation<T: PostgresEncodable>(_ value: T?) {
            parts.append(.bind(binds.count))
            binds.append(value.postgresBind)
        }

        /// An identifier (schema, table, column), double-quoted with quotes escaped.
        public mutating func appendInterpolation(identifier: String) {
            parts.append(.sql(PostgresQuery.quoteIdentifier(identifier)))
        }

        /// A nested query; its placeholders are renumbered.
        public mutating func appendInterpolation(_ query: PostgresQuery) {
            let offset = binds.count
            for part in query.parts {
                switch part {
                case .sql(let s): parts.append(.sql(s))
                case .bind(let i): parts.append(.bind(i + offset))
                }
            }
            binds.append(contentsOf: query.binds)
        }
    }

    /// Quotes an identifier for SQL: `a"b` becomes `"a""b"`.
    public static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// One bound parameter: its PostgreSQL type and its text form (nil is NULL).
public struct PostgresBind: Sendable, Equatable {
    /// The parameter's type OID; 0 lets the server infer it from context.
    public var oid: UInt32
    /// The value in PostgreSQL's text input format; nil means SQL NULL.
    public var text: String?

    public init(oid: UInt32, text: String?) {
        self.oid = oid
        self.text = text
    }
}

/// Type OIDs used by this layer (pg_type.oid).
public enum PostgresOID {
    public static let unknown: UInt32 = 0
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let float8: UInt32 = 701
    public static let timestamptz: UInt32 = 1184
    public static let uuid: UInt32 = 2950
    public static let jsonb: UInt32 = 3802
    public static let boolArray: UInt32 = 1000
    public static let int4Array: UInt32 = 1007
    public static let textArray: UInt32 = 1009
    public static let int8Array: UInt32 = 1016
    public static let float8Array: UInt32 = 1022
    public static let timestamptzArray: UInt32 = 1185
    public static let uuidArray: UInt32 = 2951
    public static let jsonbArray: UInt32 = 3807
}
