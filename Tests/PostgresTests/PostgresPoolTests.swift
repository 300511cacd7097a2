import Foundation
import Postgres
import Testing

@Suite("PostgresPool")
struct PostgresPoolTests {
    @Test("64 concurrent tasks share a pool of 4 connections; each connection serves one task at a time")
    func concurrentTasks() async throws {
        let pool = PostgresPool(connectionString: try TestDatabase.url, size: 4, logger: .postgres)
        let table = "pool_\(UUID().uuidString.prefix(8).lowercased())"
        try await pool.withConnection { db in
            try db.execute("CREATE TABLE \(identifier: table) (task int, pid int, started timestamptz, ended timestamptz)")
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<64 {
                group.addTask {
                    _ = try await pool.withConnection { db in
                        // pg_sleep keeps the connection busy so overlap would show.
                        try db.execute("""
                            INSERT INTO \(identifier: table)
                            SELECT \(task), pg_backend_pid(), clock_timestamp(), (SELECT clock_timestamp() FROM pg_sleep(0.005))
                            """)
                    }
                }
            }
            try await group.waitForAll()
        }
        let (count, pids, overlaps) = try await pool.withConnection { db -> (Int, Int, Int) in
            let r = try db.query("""
                SELECT (SELECT count(*) FROM \(identifier: table)) AS n,
                       (SELECT count(DISTINCT pid) FROM \(identifier: table)) AS pids,
                       (SELECT count(*) FROM \(identifier: table) a JOIN \(identifier: table) b
                          ON a.pid = b.pid AND a.task < b.task
                         AND a.started < b.ended AND b.started < a.ended) AS overlaps
                """)[0]
            try db.execute("DROP TABLE \(identifier: table)")
            return (try r.decode(Int.self, "n"), try r.decode(Int.self, "pids"), try r.decode(Int.self, "overlaps"))
        }
        #expect(count == 64)
        #expect(pids <= 4 && pids >= 1)
        #expect(overlaps == 0, "a connection served two tasks at once")
        await pool.close()
    }

    @Test("a connection killed by the server is noticed and replaced")
    func killedConnectionIsReplaced() async throws {
        let pool = PostgresPool(connectionString: try TestDatabase.url, size: 1, logger: .postgres)
        let firstPID = try await pool.withConnection { db in Int(db.backendPID) }
        let admin = try TestDatabase.connect()
        let killed = try admin.query("SELECT pg_terminate_backend(\(Int32(firstPID)))")[0].decode(Bool.self, at: 0)
        #expect(killed)
        // Wait (bounded, no sleep) until the server has ended the backend.
        var gone = false
        for _ in 0..<1000 where !gone {
            gone = try admin.query("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = \(firstPID)")[0].decode(Bool.self, at: 0)
        }
        #expect(gone)
        // The next use finds the connection dead: a lost-connection error, not a hang.
        do {
            _ = try await pool.withConnection { db in try db.query("SELECT 1").count }
            Issue.record("using a terminated connection must fail once")
        } catch let e as PostgresError {
            #expect(e.kind == .connectionLost, "\(e)")
        }
        // ... and the pool replaced it.
        let secondPID = try await pool.withConnection { db in Int(db.backendPID) }
        #expect(secondPID != firstPID)
        // A transaction retries through a lost connection by itself.
        _ = try admin.query("SELECT pg_terminate_backend(\(Int32(secondPID)))")
        for _ in 0..<1000 {
            if try admin.query("SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = \(secondPID)")[0].decode(Bool.self, at: 0) { break }
        }
        let value = try await pool.withTransaction { db in try db.query("SELECT 41 + 1")[0].decode(Int.self, at: 0) }
        #expect(value == 42)
        await pool.close()
    }

    @Test("an unreachable database fails every call with connectionFailed")
    func unreachable() async throws {
        let pool = PostgresPool(connectionString: "postgresql://postgres@127.0.0.1:1/x", size: 2, logger: .postgres)
        await #expect(throws: PostgresError.self) {
            try await pool.withConnection { db in try db.execute("SELECT 1") }
        }
    }
}
