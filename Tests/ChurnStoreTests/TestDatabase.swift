import ChurnStore
import Foundation
import Postgres
import Testing

/// A fresh database per test, created on the cluster of `DATABASE_URL` (ops/test) and dropped
/// afterwards, so tests that own the `churnwatch` schema can run in parallel.
struct FreshDatabase {
    let name: String
    let url: String

    static var serverURL: String {
        get throws {
            let env = ProcessInfo.processInfo.environment
            guard let url = env["TEST_DATABASE_URL"] ?? env["DATABASE_URL"], !url.isEmpty else {
                throw SetupError("DATABASE_URL is not set: run the tests with ops/test, which starts a throwaway PostgreSQL")
            }
            return url
        }
    }

    static func create() throws -> FreshDatabase {
        let server = try serverURL
        let name = "cw_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        let admin = try PostgresConnection(connectionString: server, logger: .postgres)
        try admin.execute("CREATE DATABASE \(identifier: String(name))")
        return FreshDatabase(name: String(name), url: server)
    }

    func connect() throws -> PostgresConnection {
        try PostgresConnection(connectionString: url, overrides: ["dbname": name], logger: .postgres)
    }

    func pool(size: Int = 4) -> PostgresPool {
        PostgresPool(connectionString: url, overrides: ["dbname": name], size: size, logger: .postgres)
    }

    func drop() {
        guard let admin = try? PostgresConnection(connectionString: url, logger: .postgres) else { return }
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
    }

    /// Runs `body` with a fresh database, dropped afterwards.
    static func with<T>(_ body: (FreshDatabase) async throws -> T) async throws -> T {
        let db = try create()
        defer { db.drop() }
        return try await body(db)
    }
}

struct SetupError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// The project's migrations, read from sql/migrations of this checkout.
enum ProjectMigrations {
    static var directory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql/migrations")
    }

    static func load() throws -> [Migration] { try Migrator.load(directory: directory) }
}
