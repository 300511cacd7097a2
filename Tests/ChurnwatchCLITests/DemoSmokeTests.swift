import Foundation
import Testing

/// `ops/demo`, the README's first command, end to end with a small population and the debug
/// binaries of this build (CHURNWATCH_BIN_DIR), in a directory of its own.
@Suite("ops/demo")
struct DemoSmokeTests {
    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Processes whose command line mentions `text`.
    static func processes(mentioning text: String) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { Int($0) != nil }.compactMap { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let command = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            return command.contains(text) ? "\(pid): \(command)" : nil
        }
    }

    @Test("300 subscribers of 2 apps, 2 nights: exits 0, shows each night's segments and events of both apps, the summary, the win-back queue, a report of both apps and the explore commands, and stops the simulator")
    func smallDemo() async throws {
        let demoDir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-demo-\(UUID().uuidString.prefix(8))")
        let pgDir = demoDir.appendingPathComponent("pg").path
        defer {
            let destroy = Process()
            destroy.executableURL = Self.repository.appendingPathComponent("ops/pg")
            destroy.arguments = ["destroy"]
            destroy.environment = ProcessInfo.processInfo.environment.merging(["CHURNWATCH_PG_DIR": pgDir]) { _, new in new }
            if (try? CLIRunner.spawn(destroy)) != nil { _ = ChildExit.status(of: destroy) }
            try? FileManager.default.removeItem(at: demoDir)
        }

        let process = Process()
        process.executableURL = Self.repository.appendingPathComponent("ops/demo")
        var env = ProcessInfo.processInfo.environment
        // The demo keeps its own cluster: nothing from the test's may leak in.
        for key in ["DATABASE_URL", "TEST_DATABASE_URL", "CHURNWATCH_PG_DIR", "CHURNWATCH_PG_PORT"] { env[key] = nil }
        env["DEMO_SUBSCRIBERS"] = "300"
        env["DEMO_NIGHTS"] = "2"
        env["DEMO_START"] = "2026-10-01T02:00:00Z"
        env["CHURNWATCH_BIN_DIR"] = CLIRunner.binary.deletingLastPathComponent().path
        env["CHURNWATCH_DEMO_DIR"] = demoDir.path
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try CLIRunner.spawn(process)
        let errHandle = err.fileHandleForReading, outHandle = out.fileHandleForReading
        // The demo takes a while: wait for it on a thread of its own (see `OwnThread`).
        let (status, stdout, stderr) = try await OwnThread.run { () -> (Int32, String, String) in
            let errData = ReadAll(errHandle)
            let outData = outHandle.readDataToEndOfFile()
            let status = ChildExit.status(of: process)
            return (status, String(decoding: outData, as: UTF8.self), String(decoding: errData.wait(), as: UTF8.self))
        }

        #expect(status == 0, "stdout:\n\(stdout.suffix(2000))\nstderr:\n\(stderr.suffix(1500))")
        for expected in ["night 1 of 2: 2026-10-01T02:00:00Z", "night 2 of 2: 2026-10-02T02:00:00Z",
                         "change feed: ", "run 2 done:", "run 4 done:",
                         "churnwatch apps add com.example.churnwatch.app2", "app com.example.churnwatch.app2:",
                         "segment                      subscriptions   change", "will_not_renew", "no earlier day in segment_daily",
                         "change since 2026-10-01",
                         "events this night: none (the first poll", "events this night by type",
                         "summary: 2 nights of 300 subscribers", "events by type over the 2 nights", "win-back queue by campaign",
                         "churnwatch winback claim --campaign save_offer --consumer demo --limit 3 --as-of 2026-10-02T02:00:00Z",
                         "churnwatch status", "ops/pg stop",
                         // The team's tool: an endpoint on a local receiver, reached each night and by serve.
                         "churnwatch webhooks add demo-tool", "demo-tool: HTTP 200", "what the team's tool received",
                         "invalid 0, out of order 0, a repeated id with another body 0", "churn_event.created: ", "webhook-id: msg_"] {
            #expect(stdout.contains(expected), "missing \"\(expected)\" in:\n\(stdout)")
        }
        // The first night: the change feed's first sync establishes what Apple notified, and the
        // run polls every due subscription without a failure.
        let first = try #require(stdout.split(separator: "\n").first { $0.contains("run 1 done: ") }, "\(stdout)")
        let counts = first.split(separator: " ").compactMap { Int(String($0).trimmingCharacters(in: .punctuationCharacters)) }
        #expect(counts.count == 4 && counts[1] > 0 && counts[1] == counts[2] && counts[3] == 0, "\(first)")
        // Every segment table (one per app and night) adds up to the app's population.
        let totals = stdout.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("total ") && $0.contains("  ") }
        #expect(totals.count == 4, "\(totals)")
        for line in totals {
            #expect(line.split(separator: " ").dropFirst().first == "150", "\(line)")
        }
        // Night 2's events are listed one type per row with a count.
        let eventRows = stdout.components(separatedBy: "events this night by type").last?
            .split(separator: "\n").prefix(while: { !$0.contains("==>") })
            .filter { $0.contains("|") && !$0.contains("event") } ?? []
        #expect(!eventRows.isEmpty, "\(stdout)")
        // It ends with the week's report, written where it says.
        let report = demoDir.appendingPathComponent("churnwatch-report.html")
        #expect(stdout.contains("churnwatch report --out \(report.path) --days 2 --as-of 2026-10-02T08:00:00Z"), "\(stdout.suffix(2000))")
        #expect(stdout.contains("Open it in a browser: file://\(report.path)"))
        let html = (try? String(contentsOf: report, encoding: .utf8)) ?? ""
        #expect(html.contains("data-panel=\"segments\"") && html.contains("data-panel=\"runs\""), "report: \(html.prefix(300))")
        #expect(html.contains("com.example.churnwatch.app2"), "the report shows the second app: \(html.prefix(300))")
        let simulator = Self.processes(mentioning: demoDir.appendingPathComponent("sim").path)
        #expect(simulator.isEmpty, "the simulator outlived the demo: \(simulator)")
    }
}

/// Reads a pipe to its end on another thread (so neither pipe fills while the other is read).
private final class ReadAll: @unchecked Sendable {
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
