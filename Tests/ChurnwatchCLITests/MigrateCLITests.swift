import Foundation
import Testing

@Suite("churnwatch migrate (the binary)")
struct MigrateCLITests {
    @Test("an unreachable database exits 69 with one line naming host and port")
    func unreachable() async throws {
        let r = try await CLIRunner.run(["migrate", "--database-url", "postgresql://postgres@127.0.0.1:1/x"])
        #expect(r.status == 69)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(r.stderr)")
        #expect(r.stderr.contains("127.0.0.1") && r.stderr.contains("port 1"))
    }

    @Test("no database configured exits 78 naming the setting")
    func missingConfiguration() async throws {
        let r = try await CLIRunner.run(["migrate"])
        #expect(r.status == 78)
        #expect(r.stderr.contains("DATABASE_URL"))
        #expect(r.stderr.split(separator: "\n").count == 1)
    }

    @Test("migrate applies, then is a no-op; --status lists applied migrations")
    func migrateThenStatus() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        let first = try await CLIRunner.run(["migrate"], environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("applied"))
        #expect(first.stdout.contains("0001_init.sql"))
        let second = try await CLIRunner.run(["migrate"], environment: env)
        #expect(second.status == 0)
        #expect(second.stdout.contains("up to date"))
        let status = try await CLIRunner.run(["migrate", "--status"], environment: env)
        #expect(status.status == 0)
        #expect(status.stdout.contains("applied  0001_init.sql"))
    }

    @Test("--help lists the commands")
    func help() async throws {
        let r = try await CLIRunner.run(["--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("migrate"))
    }
}

@Suite("churnwatch import (the binary)")
struct ImportCLITests {
    @Test("imports a CSV, reports rejected lines on stderr, and a second import changes nothing")
    func importFile() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        await #expect(try CLIRunner.run(["migrate"], environment: env).status == 0)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID()).csv")
        defer { try? FileManager.default.removeItem(at: file) }
        try "original_transaction_id,app_account_token,customer_ref,environment\n5000001,,a,Production\nnot valid!,,b,Production\n5000002,,c,Sandbox\n"
            .write(to: file, atomically: true, encoding: .utf8)
        let first = try await CLIRunner.run(["import", file.path], environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("imported 2 new subscriptions"))
        #expect(first.stderr.contains("line 3:"))
        let second = try await CLIRunner.run(["import", file.path], environment: env)
        #expect(second.status == 0)
        #expect(second.stdout.contains("imported 0 new subscriptions"))
        #expect(second.stdout.contains("2 already registered"))
    }

    @Test("a file with nothing importable exits 65 with one line")
    func nothingImportable() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        await #expect(try CLIRunner.run(["migrate"], environment: env).status == 0)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID()).csv")
        defer { try? FileManager.default.removeItem(at: file) }
        try "email,name\nx@y,z\n".write(to: file, atomically: true, encoding: .utf8)
        let r = try await CLIRunner.run(["import", file.path], environment: env)
        #expect(r.status == 65)
        #expect(r.stderr.contains("unknown column \"email\""))
        #expect(r.stderr.split(separator: "\n").count == 1)
    }
}
