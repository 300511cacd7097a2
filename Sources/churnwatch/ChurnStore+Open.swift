import ChurnStore
import Logging

extension DatabaseStore {
    /// A command's store of the database: at most `connections` connections, the store's lines
    /// under `logger` (`churnwatch.store` unless the command has its own) and the driver's under
    /// `churnwatch.postgres`. The libraries take their loggers from here. An app's store is made
    /// from it (``DatabaseStore/app(_:)``, ``DatabaseStore/scoped(to:)``), for an app that exists.
    static func open(_ url: String, connections: Int = 1, logger: Logger = Logger(label: "churnwatch.store")) -> DatabaseStore {
        DatabaseStore(connectionString: url, connections: connections, logger: logger, databaseLogger: Logger(label: "churnwatch.postgres"))
    }
}
