import Foundation
import Logging
import Postgres
import Testing

@Suite("PostgresConnection against a real server")
struct PostgresConnectionTests {
    @Test("every supported type round-trips, including NULL and extremes")
    func roundTrip() throws {
        try TestDatabase.withSchema { db, _ in
            try db.execute("""
                CREATE TABLE v (
                    s text, i8 bigint, i4 integer, i2 smallint, b boolean, d double precision,
                    t timestamptz, u uuid, bytes bytea, j jsonb, arr text[], iarr bigint[]
                )
                """)
            let when = Date(timeIntervalSince1970: 1_763_719_620.123456)
            let uuid = UUID()
            let bytes = Data([0, 1, 0x5C, 0x27, 0xFF, 0x7F])
            let texts: [String?] = ["plain", "with,comma", "quote\"and\\slash", "NULL", "", nil, "ünïcødé 🚀", "{brace}"]
            try db.execute("""
                INSERT INTO v VALUES (\("Grüße, 世界 — \t\n\\ 'quoted'"), \(Int64.max), \(Int32.min), \(Int16.max),
                    \(true), \(-1.5e-300), \(when), \(uuid), \(bytes), \(PostgresJSON(text: #"{"a": [1, "x"]}"#)),
                    \(texts), \([Int64.min, 0, Int64.max]))
                """)
            try db.execute("""
                INSERT INTO v VALUES (\(String?.none), \(Int64?.none), \(Int32?.none), \(Int16?.none), \(Bool?.none),
                    \(Double?.none), \(Date?.none), \(UUID?.none), \(Data?.none), \(PostgresJSON?.none), \([String]?.none), \([Int64]?.none))
                """)
            try db.execute("INSERT INTO v (i8, i4, i2, d) VALUES (\(Int64.min), \(Int32.max), \(Int16.min), \(Double.infinity))")
            let rows = try db.query("SELECT * FROM v ORDER BY i8 DESC NULLS LAST")
            #expect(rows.count == 3)
            let r = rows[0]
            #expect(try r.decode(String.self, "s") == "Grüße, 世界 — \t\n\\ 'quoted'")
            #expect(try r.decode(Int64.self, "i8") == Int64.max)
            #expect(try r.decode(Int32.self, "i4") == Int32.min)
            #expect(try r.decode(Int16.self, "i2") == Int16.max)
            #expect(try r.decode(Bool.self, "b") == true)
            #expect(try r.decode(Double.self, "d") == -1.5e-300)
            let t = try r.decode(Date.self, "t")
            #expect(abs(t.timeIntervalSince1970 - when.timeIntervalSince1970) < 0.000_001)
            #expect(try r.decode(UUID.self, "u") == uuid)
            #expect(try r.decode(Data.self, "bytes") == bytes)
            struct J: Decodable, Equatable { var a: [Alt] }
            enum Alt: Decodable, Equatable {
                case int(Int), string(String)
                init(from decoder: Decoder) throws {
                    let c = try decoder.singleValueContainer()
                    if let i = try? c.decode(Int.self) { self = .int(i) } else { self = .string(try c.decode(String.self)) }
                }
            }
            #expect(try r.decode(PostgresJSON.self, "j").decode(J.self) == J(a: [.int(1), .string("x")]))
            #expect(try r.decode([String?].self, "arr") == texts)
            #expect(try r.decode([Int64].self, "iarr") == [Int64.min, 0, Int64.max])
            #expect(try r.decode(Int.self, "i8") == Int.max)

            let n = rows[2]
            #expect(try n.decode(String?.self, "s") == nil)
            #expect(try n.decode(Int64?.self, "i8") == nil)
            #expect(try n.decode(Date?.self, "t") == nil)
            #expect(try n.decode(UUID?.self, "u") == nil)
            #expect(try n.decode(Data?.self, "bytes") == nil)
            #expect(try n.decode(PostgresJSON?.self, "j") == nil)
            #expect(try n.decode([String]?.self, "arr") == nil)
            #expect(try n.isNull("b"))

            let m = rows[1]
            #expect(try m.decode(Int64.self, "i8") == Int64.min)
            #expect(try m.decode(Int32.self, "i4") == Int32.max)
            #expect(try m.decode(Int16.self, "i2") == Int16.min)
            #expect(try m.decode(Double.self, "d") == .infinity)
        }
    }

    @Test("timestamps are stored as instants whatever the session time zone", arguments: [
        "UTC", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Chatham",
    ])
    func timeZones(zone: String) throws {
        let db = try TestDatabase.connect()
        let instant = Date(timeIntervalSince1970: 1_700_000_000.5)
        // The connection is UTC; a timestamp written with an offset still decodes to the instant.
        let row = try db.query("""
            SELECT (\(instant)::timestamptz AT TIME ZONE \(zone))::text AS local,
                   \(instant)::timestamptz AS back,
                   ((\(instant)::timestamptz AT TIME ZONE \(zone)) AT TIME ZONE \(zone)) AS again
            """)[0]
        #expect(try row.decode(Date.self, "back") == instant)
        #expect(try row.decode(Date.self, "again") == instant)
        try db.execute("SELECT set_config('TimeZone', \(zone), false)")
        let shifted = try db.query("SELECT \(instant)::timestamptz::text AS t")[0]
        let text = try shifted.decode(String.self, "t")
        #expect(try shifted.decode(Date.self, "t") == instant, "parses \(text)")
    }

    @Test("a decoding error names the column and the expected type")
    func decodingErrorNamesColumn() throws {
        let db = try TestDatabase.connect()
        let row = try db.query("SELECT 'abc'::text AS name, NULL::int AS missing, 3000000000::bigint AS big")[0]
        do {
            _ = try row.decode(Int.self, "name")
            Issue.record("decoding text as Int should fail")
        } catch let error as PostgresError {
            #expect(error.kind == .decoding)
            #expect(error.message.contains("\"name\""))
            #expect(error.message.contains("Int"))
        }
        #expect(throws: PostgresError.self) { try row.decode(Int.self, "missing") }
        #expect(throws: PostgresError.self) { try row.decode(Int32.self, "big") }
        #expect(throws: PostgresError.self) { try row.decode(Int.self, "no_such_column") }
    }

    @Test("a value that looks like SQL is stored verbatim")
    func injectionIsInert() throws {
        try TestDatabase.withSchema { db, _ in
            try db.execute("CREATE TABLE x (v text)")
            let evil = "'); drop table x; --"
            try db.execute("INSERT INTO x VALUES (\(evil))")
            let back = try db.query("SELECT v FROM x WHERE v = \(evil)")
            #expect(back.count == 1)
            #expect(try back[0].decode(String.self, "v") == evil)
            let q: PostgresQuery = "SELECT \(evil), \(identifier: "we\"ird")"
            #expect(q.sql == #"SELECT $1, "we""ird""#)
            #expect(q.binds == [PostgresBind(oid: 0, text: evil)])
        }
    }

    @Test("a value holding a NUL byte is refused before it is sent, naming its parameter; its neighbours go through")
    func nulByteIsRefused() throws {
        let db = try TestDatabase.connect()
        do {
            _ = try db.query("SELECT \("fine")::text AS a, \("a\u{0}b")::text AS b")
            Issue.record("a NUL byte was sent")
        } catch let error as PostgresError {
            #expect(error.kind == .usage)
            #expect(error.message.contains("$2 contains a NUL byte"), "\(error.message)")
        }
        let rows = try db.query("SELECT \("fine")::text AS a, \(String?.none)::text AS b, \("")::text AS c")
        #expect(try rows[0].decode(String.self, "a") == "fine")
        #expect(try rows[0].decode(String?.self, "b") == nil)
        #expect(try rows[0].decode(String.self, "c") == "")
    }

    @Test("composed queries renumber their placeholders")
    func composition() throws {
        let db = try TestDatabase.connect()
        let parts: [PostgresQuery] = (1...3).map { "(\($0), \("v\($0)"))" }
        let q: PostgresQuery = "SELECT sum(a)::bigint AS total, string_agg(b, ',' ORDER BY a) AS names FROM (VALUES \(PostgresQuery.joined(parts, separator: ", "))) AS t(a, b)"
        #expect(q.sql.contains("$6"))
        let row = try db.query(q)[0]
        #expect(try row.decode(Int.self, "total") == 6)
        #expect(try row.decode(String.self, "names") == "v1,v2,v3")
    }

    @Test("a transaction rolls back when its body throws and commits otherwise")
    func transactions() throws {
        try TestDatabase.withSchema { db, _ in
            try db.execute("CREATE TABLE x (v int)")
            struct Boom: Error {}
            #expect(throws: Boom.self) {
                try db.transaction { tx in
                    try tx.execute("INSERT INTO x VALUES (1)")
                    throw Boom()
                }
            }
            #expect(try db.query("SELECT count(*) FROM x")[0].decode(Int.self, at: 0) == 0)
            try db.transaction { tx in try tx.execute("INSERT INTO x VALUES (2)") }
            #expect(try db.query("SELECT count(*) FROM x")[0].decode(Int.self, at: 0) == 1)
            // An error swallowed inside the body aborts the transaction: COMMIT must say so.
            #expect(throws: PostgresError.self) {
                try db.transaction { tx in
                    try tx.execute("INSERT INTO x VALUES (3)")
                    _ = try? tx.execute("SELECT 1/0")
                }
            }
            #expect(try db.query("SELECT count(*) FROM x")[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test("errors carry SQLSTATE and kind, and never the bound values")
    func errorsAreClassifiedAndSafe() throws {
        try TestDatabase.withSchema { db, _ in
            try db.execute("CREATE TABLE u (k text PRIMARY KEY, n int)")
            let secret = "sk_live_4242424242"
            try db.execute("INSERT INTO u VALUES (\(secret), 1)")
            do {
                try db.execute("INSERT INTO u VALUES (\(secret), 2)")
                Issue.record("duplicate key must fail")
            } catch let e as PostgresError {
                #expect(e.kind == .uniqueViolation)
                #expect(e.sqlState == "23505")
                #expect(!e.description.contains(secret))
            }
            do {
                try db.execute("INSERT INTO u VALUES ('k2', \(secret)::int)")
                Issue.record("bad integer must fail")
            } catch let e as PostgresError {
                #expect(e.sqlState == "22P02")
                #expect(!e.description.contains(secret), "\(e)")
            }
            do {
                try db.execute("SELECT * FROM no_such_table")
                Issue.record("missing table must fail")
            } catch let e as PostgresError {
                #expect(e.kind == .server)
                #expect(e.sqlState == "42P01")
            }
            #expect(throws: PostgresError.self) { try db.execute("SELECT \("nul\u{0}byte")") }
        }
    }

    @Test("server notices go to the logger, not stderr")
    func noticesAreLogged() throws {
        let box = CapturingLogHandler.Box()
        let logger = Logger(label: "notices") { _ in CapturingLogHandler(box: box) }
        let db = try TestDatabase.connect(logger: logger)
        try db.runScript("DO $$ BEGIN RAISE NOTICE 'churnwatch-notice-%', 42; END $$")
        #expect(box.messages.contains { $0.1.contains("churnwatch-notice-42") })
    }

    @Test("advisory locks exclude a second connection until released")
    func advisoryLocks() throws {
        let a = try TestDatabase.connect()
        let b = try TestDatabase.connect()
        let key = PostgresAdvisoryLockKey.named("test-\(UUID())")
        #expect(try a.tryAdvisoryLock(key))
        #expect(try b.tryAdvisoryLock(key) == false)
        #expect(try a.advisoryUnlock(key))
        #expect(try b.tryAdvisoryLock(key))
        #expect(try b.advisoryUnlock(key))
        // Transaction-level locks end with the transaction.
        try a.transaction { (tx: PostgresConnection) throws -> Void in
            #expect(try tx.tryTransactionAdvisoryLock(key))
            #expect(try b.tryAdvisoryLock(key) == false)
        }
        #expect(try b.tryAdvisoryLock(key))
        #expect(try b.advisoryUnlock(key))
        #expect(PostgresAdvisoryLockKey.named("a") == PostgresAdvisoryLockKey.named("a"))
        #expect(PostgresAdvisoryLockKey.named("a") != PostgresAdvisoryLockKey.named("b"))
    }

    @Test("COPY streams 100,000 rows with tabs, newlines, backslashes and NULLs intact")
    func copy() throws {
        try TestDatabase.withSchema { db, _ in
            try db.execute("CREATE TABLE c (id bigint, s text, t timestamptz, arr text[])")
            let awkward = ["tab\there", "line\nbreak", "back\\slash", "\\N", "cr\rhere", "ütf ✓", "", "quote\"s"]
            let base = Date(timeIntervalSince1970: 1_700_000_000)
            let copied = try db.copyFrom("COPY c (id, s, t, arr) FROM STDIN") { w in
                for i in 0..<100_000 {
                    let s: String? = i % 9 == 8 ? nil : awkward[i % 8]
                    try w.row([Int64(i), s, base.addingTimeInterval(Double(i)), [awkward[i % 8], "x"]])
                }
            }
            #expect(copied == 100_000)
            let rows = try db.query("SELECT id, s, t, arr FROM c WHERE id < 18 ORDER BY id")
            for row in rows {
                let i = try row.decode(Int.self, "id")
                let expected: String? = i % 9 == 8 ? nil : awkward[i % 8]
                #expect(try row.decode(String?.self, "s") == expected)
                #expect(try row.decode(Date.self, "t") == base.addingTimeInterval(Double(i)))
                #expect(try row.decode([String].self, "arr") == [awkward[i % 8], "x"])
            }
            #expect(try db.query("SELECT count(*) FROM c WHERE s IS NULL")[0].decode(Int.self, at: 0) == 11_111)
            // A failing COPY leaves the connection usable.
            #expect(throws: PostgresError.self) {
                try db.copyFrom("COPY c (id) FROM STDIN") { w in try w.row(texts: ["not a number"]) }
            }
            #expect(try db.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test("pipeline sends many statements in one round trip; an error aborts the rest")
    func pipeline() throws {
        try TestDatabase.withSchema { db, _ in
            try db.execute("CREATE TABLE p (k int PRIMARY KEY)")
            let inserts: [PostgresQuery] = (1...50).map { "INSERT INTO p VALUES (\($0))" }
            #expect(try db.pipeline(inserts) == Array(repeating: 1, count: 50))
            let bad: [PostgresQuery] = ["INSERT INTO p VALUES (\(100))", "INSERT INTO p VALUES (\(1))", "INSERT INTO p VALUES (\(101))"]
            #expect(throws: PostgresError.self) { try db.pipeline(bad) }
            // One implicit transaction: nothing of the failed pipeline stays.
            #expect(try db.query("SELECT count(*) FROM p")[0].decode(Int.self, at: 0) == 50)
            #expect(try db.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        }
    }

    @Test("an unreachable server fails with one line naming host and port")
    func unreachable() throws {
        do {
            _ = try PostgresConnection(connectionString: "postgresql://postgres@127.0.0.1:1/x", logger: .postgres)
            Issue.record("connecting to port 1 must fail")
        } catch let e as PostgresError {
            #expect(e.kind == .connectionFailed)
            #expect(e.description.contains("127.0.0.1"))
            #expect(e.description.contains("1"))
            #expect(!e.description.contains("\n"))
        }
    }
}
