import CLibPQ
import Foundation

/// The rows of one statement's result. Owns the libpq result and frees it.
///
/// Not Sendable: decode rows where the query ran (inside the pool's closure).
public final class PostgresRows: Sequence {
    let result: OpaquePointer
    /// Number of rows.
    public let count: Int
    /// Column names, in order.
    public let columns: [String]
    /// Rows affected, for INSERT/UPDATE/DELETE/COPY; 0 otherwise.
    public let affectedRows: Int

    init(result: OpaquePointer) {
        self.result = result
        count = Int(PQntuples(result))
        let n = Int(PQnfields(result))
        var names: [String] = []
        names.reserveCapacity(n)
        for i in 0..<n { names.append(String(cString: PQfname(result, Int32(i)))) }
        columns = names
        affectedRows = Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    deinit { PQclear(result) }

    public subscript(index: Int) -> PostgresRow {
        precondition(index >= 0 && index < count, "row index out of range")
        return PostgresRow(rows: self, index: Int32(index))
    }

    public func makeIterator() -> AnyIterator<PostgresRow> {
        var i = 0
        return AnyIterator {
            guard i < self.count else { return nil }
            defer { i += 1 }
            return PostgresRow(rows: self, index: Int32(i))
        }
    }

    /// The first row, if any.
    public var first: PostgresRow? { count > 0 ? self[0] : nil }

    /// The position of the column named `name` (the first, when several share it). Column
    /// names are compared exactly, as a quoted identifier would be; results have few columns,
    /// so a scan of the names decoded once beats a lookup through libpq per value.
    func columnIndex(_ name: String) throws -> Int32 {
        guard let i = columns.firstIndex(of: name) else {
            throw PostgresError(kind: .usage, message: "no column \"\(name)\" in the result")
        }
        return Int32(i)
    }
}

/// One row of a result, decoded by column name or position.
public struct PostgresRow {
    let rows: PostgresRows
    let index: Int32

    /// Decodes the column at `column` (0-based) as `T`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws -> T {
        guard column >= 0 && column < rows.columns.count else {
            throw PostgresError(kind: .usage, message: "no column \(column) in the result")
        }
        return try decodeColumn(T.self, Int32(column))
    }

    /// Decodes the column named `column` as `T`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, _ column: String) throws -> T {
        try decodeColumn(T.self, rows.columnIndex(column))
    }

    /// True when the column is SQL NULL.
    public func isNull(_ column: String) throws -> Bool {
        PQgetisnull(rows.result, index, try rows.columnIndex(column)) == 1
    }

    private func decodeColumn<T: PostgresDecodable>(_ type: T.Type, _ c: Int32) throws -> T {
        do {
            if PQgetisnull(rows.result, index, c) == 1 {
                return try T.decodeNull()
            }
            let length = Int(PQgetlength(rows.result, index, c))
            guard let raw = PQgetvalue(rows.result, index, c) else { return try T.decodeNull() }
            return try raw.withMemoryRebound(to: UInt8.self, capacity: length) { p in
                try T.decode(postgresText: UnsafeBufferPointer(start: p, count: length))
            }
        } catch let failure as PostgresDecodingFailure {
            let name = rows.columns[Int(c)]
            throw PostgresError(
                kind: .decoding,
                message: "column \"\(name)\" (type oid \(PQftype(rows.result, c))): expected \(T.self): \(failure.reason)"
            )
        }
    }
}
