import Foundation
import Testing

@Suite("churnwatch migrate (the binary)")
struct MigrateCLITests {
    @Test("an unreachable database exits 69 with one line naming host and port")
    func unreachable() throws {
        let r = try CLIRunner.run(["migrate", "--database-url", "postgresql://postgres@127.0.0.1:1/x"])
        #expect(r.status == 69)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(r.stderr)")
        #expect(r.stderr.contains("127.0.0.1") && r.stderr.contains("port 1"))
    }

    @Test("no database configured exits 78 naming the setting")
    func missingConfiguration() throws {
        let r = try CLIRunner.run(["migrate"])
        #expect(r.status == 78)
        #expect(r.stderr.contains("DATABASE_URL"))
        #expect(r.stderr.split(separator: "\n").count == 1)
    }

    @Test("migrate applies, then is a no-op; --status lists applied migrations")
    func migrateThenStatus() throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL]
        let first = try CLIRunner.run(["migrate"], environment: env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("applied"))
        #expect(first.stdout.contains("0001_init.sql"))
        let second = try CLIRunner.run(["migrate"], environment: env)
        #expect(second.status == 0)
        #expect(second.stdout.contains("up to date"))
        let status = try CLIRunner.run(["migrate", "--status"], environment: env)
        #expect(status.status == 0)
        #expect(status.stdout.contains("applied  0001_init.sql"))
    }

    @Test("--help lists the commands")
    func help() throws {
        let r = try CLIRunner.run(["--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("migrate"))
    }
}
