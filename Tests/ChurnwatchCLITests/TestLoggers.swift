import Logging

/// The loggers the libraries take from their callers, with the labels churnwatch gives them.
extension Logger {
    static let postgres = Logger(label: "churnwatch.postgres")
}
