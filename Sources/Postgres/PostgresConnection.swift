import CLibPQ
import Foundation
import Logging

/// One libpq connection. Blocking; use it from one thread at a time (the pool guarantees that
/// and runs the blocking calls off Swift's cooperative threads).
///
/// Every session is set to UTC, ISO dates and UTF-8, so values decode the same everywhere.
/// Statements are prepared once per connection and reused (keyed by text and parameter types).
public final class PostgresConnection: @unchecked Sendable {
    let conn: OpaquePointer
    let logger: Logger
    private let noticeSink: NoticeSink
    private var statements: [StatementKey: String] = [:]
    private var statementCounter = 0
    private var inTransaction = false

    /// Most prepared statements kept per connection before the cache is reset.
    static let statementCacheLimit = 512

    /// Connects with a libpq connection string (`host=... dbname=...`) or a
    /// `postgresql://` URL. An empty string uses libpq's environment defaults (PGHOST, ...).
    ///
    /// `overrides` are libpq keywords applied on top of the connection string
    /// (e.g. `["dbname": "other"]`).
    ///
    /// - Throws: `PostgresError` of kind `.connectionFailed`, one line naming where it tried.
    public init(
        connectionString: String,
        overrides: [String: String] = [:],
        logger: Logger
    ) throws {
        self.logger = logger
        var keys = ["connect_timeout", "dbname", "fallback_application_name"]
        var values = ["10", connectionString, "churnwatch"]
        for (key, value) in overrides.sorted(by: { $0.key < $1.key }) {
            keys.append(key)
            values.append(value)
        }
        let c: OpaquePointer? = withArrayOfCStrings(keys) { k in
            withArrayOfCStrings(values) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let c else {
            throw PostgresError(kind: .connectionFailed, message: "cannot connect to PostgreSQL: out of memory")
        }
        guard PQstatus(c) == CONNECTION_OK else {
            let detail = Self.firstLine(PQerrorMessage(c))
            PQfinish(c)
            throw PostgresError(kind: .connectionFailed, message: "cannot connect to PostgreSQL: \(detail)")
        }
        conn = c
        noticeSink = NoticeSink(logger: logger)
        PQsetNoticeProcessor(c, { arg, message in
            guard let arg, let message else { return }
            let sink = Unmanaged<NoticeSink>.fromOpaque(arg).takeUnretainedValue()
            let text = PostgresConnection.firstLine(message)
            // NOTICE ("already exists, skipping") is chatter; WARNING deserves attention.
            if text.hasPrefix("WARNING") {
                sink.logger.warning("\(text)", metadata: ["source": "postgres"])
            } else {
                sink.logger.debug("\(text)", metadata: ["source": "postgres"])
            }
        }, Unmanaged.passUnretained(noticeSink).toOpaque())
        do {
            // Statements are prepared once per connection (parsing saved), but always planned
            // for their actual values: a generic plan guesses at LIMIT $n and unnest($n) sizes
            // and can pick a sequential scan that a custom plan never would.
            try runScript("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET client_encoding = 'UTF8'; SET IntervalStyle = 'iso_8601'; SET plan_cache_mode = 'force_custom_plan'")
        } catch {
            PQfinish(c)
            throw error
        }
    }

    deinit { PQfinish(conn) }

    /// True when libpq considers the connection unusable.
    public var isBroken: Bool { PQstatus(conn) != CONNECTION_OK }

    /// Round-trips a no-op statement: throws `connectionLost` when the server is gone.
    public func ping() throws {
        try runScript("SELECT 1")
    }

    /// The server process serving this connection.
    public var backendPID: Int32 { PQbackendPID(conn) }

    /// The host and port this connection talks to (for messages).
    public var endpoint: String {
        let host = PQhost(conn).map { String(cString: $0) } ?? "?"
        let port = PQport(conn).map { String(cString: $0) } ?? "?"
        return "\(host):\(port)"
    }

    // MARK: Statements

    /// Runs a statement and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) throws -> PostgresRows {
        PostgresRows(result: try execPrepared(query))
    }

    /// Runs a statement and returns the number of rows it affected.
    @discardableResult
    public func execute(_ query: PostgresQuery) throws -> Int {
        try self.query(query).affectedRows
    }

    /// Runs trusted SQL text (migration files, fixed setup) with the simple protocol; it may
    /// hold several statements. Never build this text from values: use `query` for those.
    public func runScript(_ sql: String) throws {
        let result = PQexec(conn, sql)
        PQclear(try check(result, sql: sql))
        // PQexec returns only the last result; earlier ones were consumed by libpq.
    }

    private struct StatementKey: Hashable {
        var sql: String
        var types: [UInt32]
    }

    private func execPrepared(_ query: PostgresQuery) throws -> OpaquePointer {
        let sql = query.sql
        let types = query.binds.map(\.oid)
        let key = StatementKey(sql: sql, types: types)
        let name: String
        if let cached = statements[key] {
            name = cached
        } else {
            if statements.count >= Self.statementCacheLimit {
                try runScript("DEALLOCATE ALL")
                statements.removeAll()
            }
            statementCounter += 1
            let fresh = "cw_\(statementCounter)"
            let prepared = types.withUnsafeBufferPointer { t in
                PQprepare(conn, fresh, sql, Int32(types.count), t.baseAddress)
            }
            PQclear(try check(prepared, sql: sql))
            statements[key] = fresh
            name = fresh
        }
        let result = try withParameterPointers(query.binds, sql: sql) { values in
            PQexecPrepared(conn, name, Int32(query.binds.count), values, nil, nil, 0)
        }
        return try check(result, sql: sql)
    }

    private func withParameterPointers<R>(
        _ binds: [PostgresBind], sql: String,
        _ body: (UnsafePointer<UnsafePointer<CChar>?>?) throws -> R
    ) throws -> R {
        // One buffer of NUL-terminated values; bytes copied whole (memchr finds a NUL: batch
        // statements bind arrays of megabytes).
        var buffer: [UInt8] = []
        var offsets: [Int] = []
        offsets.reserveCapacity(binds.count)
        for (i, bind) in binds.enumerated() {
            guard var text = bind.text else { offsets.append(-1); continue }
            let copied = text.withUTF8 { bytes -> Bool in
                if let base = bytes.baseAddress, memchr(base, 0, bytes.count) != nil { return false }
                offsets.append(buffer.count)
                buffer.append(contentsOf: bytes)
                buffer.append(0)
                return true
            }
            guard copied else {
                throw PostgresError(kind: .usage, message: "parameter $\(i + 1) contains a NUL byte, which PostgreSQL text cannot hold", statement: sql)
            }
        }
        return try buffer.withUnsafeBufferPointer { buf in
            let base = UnsafeRawPointer(buf.baseAddress)
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0 < 0 ? nil : base!.advanced(by: $0).assumingMemoryBound(to: CChar.self) }
            return try pointers.withUnsafeBufferPointer { try body($0.baseAddress) }
        }
    }

    /// Turns a libpq result into success or a classified error (freeing failed results).
    private func check(_ result: OpaquePointer?, sql: String) throws -> OpaquePointer {
        guard let result else { throw connectionError(sql: sql) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_COPY_IN:
            return result
        default:
            let error = resultError(result, sql: sql)
            PQclear(result)
            throw error
        }
    }

    private func resultError(_ result: OpaquePointer, sql: String?) -> PostgresError {
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        if state == nil && isBroken { return connectionError(sql: sql) }
        let message = primary.map { PostgresError.redact(message: $0, sqlState: state) }
            ?? Self.firstLine(PQresultErrorMessage(result))
        var kind = state.map(PostgresError.kind(forSQLState:)) ?? .server
        if isBroken { kind = .connectionLost }
        return PostgresError(kind: kind, sqlState: state, message: message, statement: sql)
    }

    private func connectionError(sql: String?) -> PostgresError {
        let detail = Self.firstLine(PQerrorMessage(conn))
        return PostgresError(
            kind: isBroken ? .connectionLost : .server,
            message: detail.isEmpty ? "connection to \(endpoint) lost" : detail,
            statement: sql
        )
    }

    static func firstLine(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "" }
        return firstLine(String(cString: text))
    }

    static func firstLine(_ text: String) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? trimmed
    }

    // MARK: Transactions

    /// Runs `body` in a transaction: COMMIT when it returns, ROLLBACK when it throws.
    /// A transaction the server aborted (an error swallowed inside `body`) throws at COMMIT.
    @discardableResult
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        guard !inTransaction else {
            throw PostgresError(kind: .usage, message: "transactions do not nest")
        }
        try runScript("BEGIN")
        inTransaction = true
        defer { inTransaction = false }
        let value: T
        do {
            value = try body(self)
        } catch {
            if !isBroken { try? runScript("ROLLBACK") }
            throw error
        }
        let result = PQexec(conn, "COMMIT")
        let committed = try check(result, sql: "COMMIT")
        let tag = String(cString: PQcmdStatus(committed))
        PQclear(committed)
        guard tag == "COMMIT" else {
            throw PostgresError(kind: .server, message: "transaction was aborted by an earlier error and rolled back", statement: "COMMIT")
        }
        return value
    }

    // MARK: COPY

    /// Streams rows with `COPY ... FROM STDIN` (text format). `statement` must be a COPY
    /// statement without parameters. Returns the number of rows copied.
    @discardableResult
    public func copyFrom(_ statement: PostgresQuery, _ body: (inout PostgresCopyWriter) throws -> Void) throws -> Int {
        guard statement.binds.isEmpty else {
            throw PostgresError(kind: .usage, message: "COPY statements take no parameters", statement: statement.sql)
        }
        let sql = statement.sql
        PQclear(try check(PQexec(conn, sql), sql: sql))
        var writer = PostgresCopyWriter { [conn] bytes in
            let ok = bytes.withUnsafeBufferPointer { b in
                b.baseAddress!.withMemoryRebound(to: CChar.self, capacity: b.count) {
                    PQputCopyData(conn, $0, Int32(b.count))
                }
            }
            guard ok == 1 else {
                throw PostgresError(kind: .connectionLost, message: Self.firstLine(PQerrorMessage(conn)), statement: sql)
            }
        }
        do {
            try body(&writer)
            try writer.flush()
        } catch {
            PQputCopyEnd(conn, "aborted by client")
            drainResults()
            throw error
        }
        guard PQputCopyEnd(conn, nil) == 1 else { throw connectionError(sql: sql) }
        var copied = 0
        var failure: PostgresError?
        while let result = PQgetResult(conn) {
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                copied = Int(String(cString: PQcmdTuples(result))) ?? 0
            } else if failure == nil {
                failure = resultError(result, sql: sql)
            }
            PQclear(result)
        }
        if let failure { throw failure }
        return copied
    }

    private func drainResults() {
        while let r = PQgetResult(conn) { PQclear(r) }
    }

    // MARK: Pipeline

    /// Sends several statements in one round trip (libpq pipeline mode) and returns the rows
    /// each affected. They run in one implicit transaction unless a transaction is open; the
    /// first error aborts the rest and is thrown.
    @discardableResult
    public func pipeline(_ queries: [PostgresQuery]) throws -> [Int] {
        if queries.isEmpty { return [] }
        guard PQenterPipelineMode(conn) == 1 else {
            throw PostgresError(kind: .usage, message: "cannot enter pipeline mode: \(Self.firstLine(PQerrorMessage(conn)))")
        }
        defer { PQexitPipelineMode(conn) }
        for q in queries {
            let types = q.binds.map(\.oid)
            let sent = try withParameterPointers(q.binds, sql: q.sql) { values in
                types.withUnsafeBufferPointer { t in
                    PQsendQueryParams(conn, q.sql, Int32(q.binds.count), t.baseAddress, values, nil, nil, 0)
                }
            }
            guard sent == 1 else { throw connectionError(sql: q.sql) }
        }
        guard PQpipelineSync(conn) == 1 else { throw connectionError(sql: nil) }
        var affected: [Int] = []
        affected.reserveCapacity(queries.count)
        var failure: PostgresError?
        for q in queries {
            while let result = PQgetResult(conn) {
                let status = PQresultStatus(result)
                if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
                    affected.append(Int(String(cString: PQcmdTuples(result))) ?? 0)
                } else if status == PGRES_FATAL_ERROR, failure == nil {
                    failure = resultError(result, sql: q.sql)
                }
                PQclear(result)
            }
        }
        // The sync result closes the pipeline.
        while let result = PQgetResult(conn) {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC { break }
        }
        if let failure { throw failure }
        if isBroken { throw connectionError(sql: nil) }
        return affected
    }
}

private final class NoticeSink: @unchecked Sendable {
    let logger: Logger
    init(logger: Logger) { self.logger = logger }
}

/// Calls `body` with a NULL-terminated C array of C strings.
private func withArrayOfCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let owned = strings.map { strdup($0) }
    defer { owned.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = owned.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
