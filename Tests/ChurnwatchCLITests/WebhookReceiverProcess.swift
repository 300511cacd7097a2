import Foundation

/// ops/webhook_receiver.py started for a test: a Standard Webhooks receiver that verifies every
/// delivery with its own implementation of the specification, records order and duplicates,
/// and fails on command (`control`).
final class WebhookReceiverProcess: @unchecked Sendable {
    struct Stats: Decodable {
        var deliveries: Int
        var accepted: Int
        var unique_ids: Int
        var valid: Int
        var invalid: Int
        var duplicates: Int
        var duplicate_ids_with_other_body: Int
        var order_violations: Int
        var by_type: [String: Int]
    }

    let process: Process
    let port: Int
    let directory: URL
    var record: URL { directory.appendingPathComponent("record.jsonl") }

    static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ops/webhook_receiver.py").path
    }

    /// Starts a receiver accepting `secrets` (any one verifies) and waits (at most 30 s) for its
    /// ready file.
    static func start(secrets: [String]) throws -> WebhookReceiverProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-receiver-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let ready = directory.appendingPathComponent("ready")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "--port", "0", "--record", directory.appendingPathComponent("record.jsonl").path,
                             "--ready-file", ready.path] + secrets.flatMap { ["--secret", $0] }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try CLIRunner.spawn(process)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, process.isRunning {
            if let line = try? String(contentsOf: ready, encoding: .utf8), let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) {
                return WebhookReceiverProcess(process: process, port: port, directory: directory)
            }
            usleep(10_000)
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        throw CLITestError("the webhook receiver (python3 \(script)) did not start: is python3 installed?")
    }

    private init(process: Process, port: Int, directory: URL) {
        (self.process, self.port, self.directory) = (process, port, directory)
    }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    /// Sets how it answers from now on (see the script's docstring).
    func control(_ json: String) throws {
        let answer = try RawHTTP.exchange(port: port, method: "POST", path: "/_control", body: json)
        guard answer.status == 200 else { throw CLITestError("receiver control \(json): \(answer.status ?? 0) \(answer.body)") }
    }

    func stats() throws -> Stats {
        try JSONDecoder().decode(Stats.self, from: Data(try RawHTTP.exchange(port: port, method: "GET", path: "/_stats").body.utf8))
    }

    /// The ids it accepted (answered 2xx), in the order first accepted.
    func ids() throws -> [String] {
        try JSONDecoder().decode([String].self, from: Data(try RawHTTP.exchange(port: port, method: "GET", path: "/_ids").body.utf8))
    }

    /// Every recorded request's JSON object, in arrival order.
    func records() throws -> [[String: Any]] {
        let text = (try? String(contentsOf: record, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// SIGKILL: a child of the test process may start with SIGTERM blocked (inherited from the
    /// spawning thread's mask), and the record is written before each answer anyway.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try? FileManager.default.removeItem(at: directory)
    }
}
