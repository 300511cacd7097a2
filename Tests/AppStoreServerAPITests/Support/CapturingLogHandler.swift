import Foundation
import Logging

/// Log lines a test reads back.
final class CapturedLogs: @unchecked Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
    }
    private let lock = NSLock()
    private var captured: [Line] = []
    var lines: [Line] { lock.withLock { captured } }
    func append(_ line: Line) { lock.withLock { captured.append(line) } }
}

/// A log handler that keeps every line (all levels) in a ``CapturedLogs``.
struct CapturingLogHandler: LogHandler {
    let logs: CapturedLogs
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(_ logs: CapturedLogs) { self.logs = logs }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        logs.append(.init(level: event.level, message: event.message.description))
    }
}
