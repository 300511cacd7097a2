import Foundation
import Logging
import Postgres

/// All SQL for churnwatch's own tables, behind named operations (entity first:
/// `subscriptionsImport`, `runCreate`, ...). Nothing outside this module builds SQL.
public struct ChurnStore: Sendable {
    public let pool: PostgresPool
    let logger: Logger
    let claimCursors = ClaimCursors()

    public init(pool: PostgresPool, logger: Logger = Logger(label: "churnwatch.store")) {
        self.pool = pool
        self.logger = logger
    }
}

/// The schema is missing or behind this build.
public struct SchemaError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

extension ChurnStore {
    /// Fails with one line when the schema has not been migrated.
    public func schemaCheck() async throws {
        let ok = try await pool.withConnection { db in
            try db.query("SELECT to_regclass('churnwatch.api_budget') IS NOT NULL")[0].decode(Bool.self, at: 0)
        }
        guard ok else { throw SchemaError(description: "the churnwatch schema is missing or out of date: run `churnwatch migrate` first") }
    }
}
