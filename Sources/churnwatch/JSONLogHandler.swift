import Foundation
import Logging

/// One JSON object per line on stderr: time, level, label, message and metadata.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: [String: String] = [:]
        for (k, v) in metadata { object[k] = "\(v)" }
        for (k, v) in event.metadata ?? [:] { object[k] = "\(v)" }
        object["ts"] = Date().ISO8601Format(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
        object["level"] = event.level.rawValue
        object["logger"] = label
        object["msg"] = event.message.description
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var data = try? encoder.encode(object) else { return }
        data.append(0x0A)
        FileHandle.standardError.write(data)
    }
}
