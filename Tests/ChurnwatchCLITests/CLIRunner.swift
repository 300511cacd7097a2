import Foundation
import Postgres

/// Runs the churnwatch executable built next to this test bundle.
struct CLIRunner {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var binary: URL {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        // The test binary lives in .build/<triple>/debug/churnwatchPackageTests.xctest (a file
        // on Linux); the executable sits in the same debug directory.
        for _ in 0..<3 {
            let candidate = dir.appendingPathComponent("churnwatch")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: "churnwatch")
    }

    static var migrationsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql/migrations").path
    }

    /// Runs churnwatch with `arguments` and an environment that contains only `environment`
    /// plus PATH, so nothing from the developer's shell leaks in.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        var env = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                   "CHURNWATCH_MIGRATIONS_DIR": migrationsDirectory]
        env.merge(environment) { _, new in new }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus,
                      stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// A fresh database on the test cluster, dropped by `drop()`.
struct ScratchDatabase {
    let name: String
    let server: String

    static func create() throws -> ScratchDatabase {
        let env = ProcessInfo.processInfo.environment
        guard let server = env["TEST_DATABASE_URL"] ?? env["DATABASE_URL"], !server.isEmpty else {
            throw CLITestError("DATABASE_URL is not set: run the tests with ops/test")
        }
        let name = "cw_cli_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try PostgresConnection(connectionString: server).execute("CREATE DATABASE \(identifier: String(name))")
        return ScratchDatabase(name: String(name), server: server)
    }

    /// The server URL with the database swapped (postgresql://.../NAME).
    var connectionURL: String {
        guard var components = URLComponents(string: server), server.hasPrefix("postgres") else {
            return server + " dbname=\(name)"
        }
        components.path = "/" + name
        return components.string ?? server
    }

    func drop() {
        _ = try? PostgresConnection(connectionString: server).execute("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
    }
}

struct CLITestError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
