import Foundation
import Logging
import Postgres
import Testing

/// The database the tests use: `DATABASE_URL`, set by ops/test to a throwaway cluster.
enum TestDatabase {
    static var url: String {
        get throws {
            let env = ProcessInfo.processInfo.environment
            guard let url = env["TEST_DATABASE_URL"] ?? env["DATABASE_URL"], !url.isEmpty else {
                throw TestSetupError("DATABASE_URL is not set: run the tests with ops/test, which starts a throwaway PostgreSQL")
            }
            return url
        }
    }

    static func connect(logger: Logger = Logger(label: "test")) throws -> PostgresConnection {
        try PostgresConnection(connectionString: url, logger: logger)
    }

    /// Runs `body` with a connection whose search_path is a fresh schema, dropped afterwards.
    static func withSchema<T>(_ body: (PostgresConnection, String) throws -> T) throws -> T {
        let connection = try connect()
        let schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try connection.execute("CREATE SCHEMA \(identifier: String(schema))")
        try connection.execute("SET search_path TO \(identifier: String(schema))")
        defer { _ = try? connection.execute("DROP SCHEMA \(identifier: String(schema)) CASCADE") }
        return try body(connection, String(schema))
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A log handler that keeps messages, to assert on what was logged.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    let box: Box
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var _messages: [(Logger.Level, String)] = []
        var messages: [(Logger.Level, String)] { lock.withLock { _messages } }
        func append(_ m: (Logger.Level, String)) { lock.withLock { _messages.append(m) } }
    }

    init(box: Box) { self.box = box }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        box.append((event.level, event.message.description))
    }
}
