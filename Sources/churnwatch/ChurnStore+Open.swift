import ChurnStore
import Logging

extension ChurnStore {
    /// A command's store for `app` (a bundle id; "" for a command that only reads and scopes each
    /// read with `scoped(to:)` or an app filter): at most `connections` connections, the store's
    /// lines under `logger` (`churnwatch.store` unless the command has its own) and the driver's
    /// under `churnwatch.postgres`. The libraries take their loggers from here.
    static func open(_ url: String, app: String, connections: Int = 1, logger: Logger = Logger(label: "churnwatch.store")) -> ChurnStore {
        ChurnStore(connectionString: url, connections: connections, app: app, logger: logger, databaseLogger: Logger(label: "churnwatch.postgres"))
    }
}
