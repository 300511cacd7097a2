import Foundation
import Logging
import Postgres

/// All SQL for churnwatch's own tables, behind named operations (entity first:
/// `subscriptionsImport`, `runCreate`, ...). Nothing outside this module builds SQL.
public struct ChurnStore: Sendable {
    public let pool: PostgresPool
    let logger: Logger

    public init(pool: PostgresPool, logger: Logger = Logger(label: "churnwatch.store")) {
        self.pool = pool
        self.logger = logger
    }
}
