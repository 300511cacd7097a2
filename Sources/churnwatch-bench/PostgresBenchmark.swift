import Foundation
import Logging
import Postgres

/// COPY versus three ways of batching upserts, on a table shaped like the worker's writes.
struct PostgresBenchmark {
    var rows: Int
    var batch = 500

    /// The figures' moment base: row i expires `i` seconds after it.
    static let base = Date(timeIntervalSince1970: 1_795_000_000)

    /// The upsert statement's tail, the same in all three ways.
    static let onConflict: PostgresQuery = """
        ON CONFLICT (id) DO UPDATE SET state = excluded.state, expires_at = excluded.expires_at,
            auto_renew = excluded.auto_renew, n = excluded.n, updated_at = excluded.updated_at
        """

    func run() throws {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw BenchError("DATABASE_URL is not set")
        }
        let db = try PostgresConnection(connectionString: url, logger: Logger(label: "churnwatch.postgres"))
        try db.runScript("""
            DROP TABLE IF EXISTS bench_rows;
            CREATE UNLOGGED TABLE bench_rows (
                id text PRIMARY KEY, token uuid, ref text, state text, expires_at timestamptz,
                auto_renew boolean, n bigint, updated_at timestamptz)
            """)
        defer { try? db.runScript("DROP TABLE IF EXISTS bench_rows") }

        let tokens = (0..<rows).map { _ in UUID() }
        let copySeconds = try timed { try copy(db, tokens: tokens) }
        print("copy_rows_per_s=\(Int(Double(rows) / copySeconds))")

        // Upserts that update every row (the batch writer's shape), three ways.
        let multiRow = Double(rows) / (try timed { try upsertMultiRow(db, round: 1) })
        let unnest = Double(rows) / (try timed { try upsertUnnest(db, round: 2) })
        let pipeline = Double(rows) / (try timed { try upsertPipeline(db, round: 3) })

        // Every row must carry the last round's values, or the figures mean nothing.
        let updated = try db.query("SELECT count(*) FROM bench_rows WHERE n = (id::bigint - 100000000) * 3")[0].decode(Int.self, at: 0)
        guard updated == rows else { throw BenchError("only \(updated) of \(rows) rows were upserted") }
        print("upsert_rows_per_s=\(Int(max(multiRow, unnest, pipeline)))")
        print("upsert_multirow_rows_per_s=\(Int(multiRow))")
        print("upsert_unnest_rows_per_s=\(Int(unnest))")
        print("upsert_pipeline_rows_per_s=\(Int(pipeline))")
        print("pg_bench_rows=\(rows)")
        print("pg_bench_batch=\(batch)")
    }

    /// Seconds `body` takes.
    private func timed(_ body: () throws -> Void) rethrows -> Double {
        let t0 = Date()
        try body()
        return Date().timeIntervalSince(t0)
    }

    /// COPY (the import path) of every row.
    private func copy(_ db: PostgresConnection, tokens: [UUID]) throws {
        let base = Self.base
        let copied = try db.copyFrom("COPY bench_rows (id, token, ref, state, expires_at, auto_renew, n, updated_at) FROM STDIN") { w in
            for i in 0..<rows {
                try w.row([String(100_000_000 + i), tokens[i], "cust\t\(i)\\x", "active", base.addingTimeInterval(Double(i)), i % 3 == 0, Int64(i), base])
            }
        }
        guard copied == rows else { throw BenchError("copied \(copied) of \(rows)") }
    }

    /// Row i's values in upsert round `round`.
    private func updatedValues(_ i: Int, _ round: Int) -> (String, String, Date, Bool, Int64) {
        (String(100_000_000 + i), round % 2 == 0 ? "expired" : "active", Self.base.addingTimeInterval(Double(i + round)), i % 2 == 0, Int64(i * round))
    }

    /// (a) one multi-row INSERT ... VALUES ... ON CONFLICT per batch.
    private func upsertMultiRow(_ db: PostgresConnection, round: Int) throws {
        for start in stride(from: 0, to: rows, by: batch) {
            let values: [PostgresQuery] = (start..<min(start + batch, rows)).map { i in
                let v = updatedValues(i, round)
                return "(\(v.0), \(v.1), \(v.2), \(v.3), \(v.4), now())"
            }
            try db.transaction { tx in
                try tx.execute("""
                    INSERT INTO bench_rows (id, state, expires_at, auto_renew, n, updated_at)
                    VALUES \(PostgresQuery.joined(values, separator: ", "))
                    \(Self.onConflict)
                    """)
            }
        }
    }

    /// (b) unnest() of one array per column: one statement, five parameters, per batch.
    private func upsertUnnest(_ db: PostgresConnection, round: Int) throws {
        for start in stride(from: 0, to: rows, by: batch) {
            let vs = (start..<min(start + batch, rows)).map { updatedValues($0, round) }
            try db.execute("""
                INSERT INTO bench_rows (id, state, expires_at, auto_renew, n, updated_at)
                SELECT id, state, expires_at, auto_renew, n, now()
                FROM unnest(\(vs.map(\.0))::text[], \(vs.map(\.1))::text[], \(vs.map(\.2)), \(vs.map(\.3)), \(vs.map(\.4)))
                     AS u(id, state, expires_at, auto_renew, n)
                \(Self.onConflict)
                """)
        }
    }

    /// (c) pipeline mode: one single-row upsert per row, one round trip per batch.
    private func upsertPipeline(_ db: PostgresConnection, round: Int) throws {
        for start in stride(from: 0, to: rows, by: batch) {
            let statements: [PostgresQuery] = (start..<min(start + batch, rows)).map { i in
                let v = updatedValues(i, round)
                return """
                    INSERT INTO bench_rows (id, state, expires_at, auto_renew, n, updated_at)
                    VALUES (\(v.0), \(v.1), \(v.2), \(v.3), \(v.4), now())
                    \(Self.onConflict)
                    """
            }
            try db.pipeline(statements)
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
