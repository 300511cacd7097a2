import Foundation
import Postgres
import Testing

/// `churnwatch run --metrics-file`: a Prometheus text exposition that node_exporter's textfile
/// collector can read at any moment, with figures that match the database.
@Suite("run metrics file and progress logs", .serialized)
struct MetricsTests {
    typealias World = NightlyRunEndToEndTests.World
    static let start = NightlyRunEndToEndTests.start
    static let day = NightlyRunEndToEndTests.day
    static func iso(_ d: Date) -> String { NightlyRunEndToEndTests.iso(d) }
    static let fast = ["--status-rate", "5000", "--history-rate", "5000"]

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-metrics-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func inode(_ path: String) throws -> UInt64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    @Test("a finished night writes a strict Prometheus exposition whose figures match the database; the file is replaced by rename, never rewritten in place")
    func finishedRun() async throws {
        let world = try await World.make(subscribers: 300, seed: 31)
        defer { world.close() }
        let db = try world.connect()
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("churnwatch.prom").path

        // A previous file, held open: the new one must arrive by rename (another inode), the old
        // one must never be written to, and no temporary file may be left.
        try "# an older file\n".write(toFile: path, atomically: false, encoding: .utf8)
        let old = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? old.close() }
        let oldInode = try Self.inode(path)

        let before = Date()
        await #expect(try world.night(Self.start, extra: Self.fast + ["--metrics-file", path]).status == 0)
        let night2 = Self.start.addingTimeInterval(Self.day)
        let r = try await world.night(night2, extra: Self.fast + ["--metrics-file", path])
        let after = Date()
        #expect(r.status == 0, "\(r.stderr.suffix(400))")

        #expect(try Self.inode(path) != oldInode, "the file was rewritten in place")
        #expect(String(decoding: try old.readToEnd() ?? Data(), as: UTF8.self) == "# an older file\n", "the old file was written to")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["churnwatch.prom"], "a temporary file was left behind")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let exposition = try PrometheusText.parse(text)

        for name in ["churnwatch_last_success_timestamp_seconds", "churnwatch_run_duration_seconds", "churnwatch_run_items",
                     "churnwatch_api_calls_total", "churnwatch_events_total", "churnwatch_segment_subscriptions",
                     "churnwatch_winback_queue_depth", "churnwatch_run_exit_code"] {
            #expect(exposition.families[name] != nil, "no \(name) in:\n\(text)")
        }
        #expect(exposition.families["churnwatch_api_calls_total"]?.type == "counter")
        #expect(exposition.families["churnwatch_segment_subscriptions"]?.type == "gauge")

        #expect(exposition.value("churnwatch_run_exit_code") == 0)
        let apps = Set(exposition.families.values.flatMap(\.samples).map { $0.labels["bundle_id"] })
        #expect(apps == [world.env["APPSTORE_BUNDLE_ID"]], "every sample is labelled with the app: \(apps)")
        let lastSuccess = try #require(exposition.value("churnwatch_last_success_timestamp_seconds"))
        #expect(lastSuccess >= before.timeIntervalSince1970.rounded(.down) && lastSuccess <= after.timeIntervalSince1970 + 1)
        #expect((exposition.value("churnwatch_run_duration_seconds") ?? -1) > 0)

        let runId = try db.query("SELECT max(id) FROM churnwatch.runs")[0].decode(Int64.self, at: 0)
        #expect(exposition.value("churnwatch_run_id") == Double(runId))
        let done = try db.query("SELECT count(*) FROM churnwatch.run_items WHERE run_id = \(runId) AND status = 'done'")[0].decode(Int.self, at: 0)
        #expect(done > 0)
        #expect(exposition.value("churnwatch_run_items", ["outcome": "done"]) == Double(done))
        #expect(exposition.value("churnwatch_run_items", ["outcome": "failed"]) == 0)
        #expect((exposition.value("churnwatch_api_calls_total", ["endpoint": "status"]) ?? 0) >= Double(done) * 0.8)
        #expect(exposition.value("churnwatch_api_calls_total", ["endpoint": "receipt"]) != nil)

        var eventsInDatabase: [String: Double] = [:]
        for row in try db.query("SELECT event, count(*) FROM churnwatch.churn_events WHERE run_id = \(runId) GROUP BY 1") {
            eventsInDatabase[try row.decode(String.self, at: 0)] = Double(try row.decode(Int.self, at: 1))
        }
        #expect(!eventsInDatabase.isEmpty, "night 2 of 300 subscribers should have events")
        let eventSamples = exposition.samples("churnwatch_events_total")
        #expect(eventSamples.count == 17, "every event type, zeros included (cancel_page_viewed, which serve logs, at 0)")
        for sample in eventSamples {
            #expect(sample.value == eventsInDatabase[sample.labels["event"] ?? ""] ?? 0, "\(sample)")
        }

        let segments = exposition.samples("churnwatch_segment_subscriptions")
        #expect(segments.count == 13)
        #expect(segments.reduce(0) { $0 + $1.value } == 300)
        for row in try db.query("SELECT segment, count(*) FROM churnwatch.subscription_segments GROUP BY 1") {
            #expect(exposition.value("churnwatch_segment_subscriptions", ["segment": try row.decode(String.self, at: 0)]) == Double(try row.decode(Int.self, at: 1)))
        }

        #expect(exposition.samples("churnwatch_winback_queue_depth").count == 8, "4 campaigns x pending, claimed")
        for row in try db.query("SELECT campaign, count(*) FROM churnwatch.winback_queue WHERE status = 'pending' GROUP BY 1") {
            #expect(exposition.value("churnwatch_winback_queue_depth", ["campaign": try row.decode(String.self, at: 0), "status": "pending"])
                    == Double(try row.decode(Int.self, at: 1)))
        }
    }

    @Test("a run stopped by its time budget exits 75, says so in the metrics and keeps the last success time of the finished run before it")
    func resumableRunKeepsLastSuccess() async throws {
        let world = try await World.make(subscribers: 300, seed: 32)
        defer { world.close() }
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("churnwatch.prom").path

        await #expect(try world.night(Self.start, extra: Self.fast + ["--metrics-file", path]).status == 0)
        let first = try PrometheusText.parse(try String(contentsOfFile: path, encoding: .utf8))
        let lastSuccess = try #require(first.value("churnwatch_last_success_timestamp_seconds"))
        let firstText = try String(contentsOfFile: path, encoding: .utf8)
        let firstFile = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? firstFile.close() }
        let firstInode = try Self.inode(path)

        // Everything is due again (stale after a minute) at 5 calls/s: the 1 s budget runs out.
        let night2 = Self.start.addingTimeInterval(Self.day)
        let r = try await world.night(night2, extra: ["--stale-after", "1m", "--status-rate", "5", "--history-rate", "5",
                                                "--max-duration", "1s", "--metrics-file", path])
        #expect(r.status == 75, "\(r.stdout) \(r.stderr.suffix(400))")
        #expect(r.stderr.contains("resumable: run 2"), "\(r.stderr.suffix(400))")

        #expect(try Self.inode(path) != firstInode)
        #expect(String(decoding: try firstFile.readToEnd() ?? Data(), as: UTF8.self) == firstText, "the old file was written to")
        let second = try PrometheusText.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(second.value("churnwatch_run_exit_code") == 75)
        #expect(second.value("churnwatch_run_id") == 2)
        #expect(second.value("churnwatch_last_success_timestamp_seconds") == lastSuccess)
        #expect((second.value("churnwatch_run_items", ["outcome": "pending"]) ?? 0) > 0)
        #expect(second.samples("churnwatch_segment_subscriptions").reduce(0) { $0 + $1.value } == 300)
    }

    @Test("a metrics file in a directory that does not exist is bad configuration (78), named before any work")
    func unwritableDirectory() async throws {
        let r = try await CLIRunner.run(["run", "--metrics-file", "/nonexistent-\(UUID().uuidString.prefix(6))/churnwatch.prom"],
                                  environment: ["DATABASE_URL": "postgresql://127.0.0.1:1/none"])
        #expect(r.status == 78, "\(r.stderr)")
        #expect(r.stderr.contains("--metrics-file"), "\(r.stderr)")
    }

    @Test("without a terminal: progress log lines every interval with counts and rates, a closing summary with durations, and no secrets")
    func progressLogLines() async throws {
        let world = try await World.make(subscribers: 300, seed: 33)
        defer { world.close() }
        // About 300 status and 300 history calls at 150/s: two seconds or more of work.
        let r = try await world.night(Self.start, extra: ["--status-rate", "150", "--history-rate", "150", "--progress-interval", "0.5s"])
        #expect(r.status == 0, "\(r.stderr.suffix(400))")
        var progress: [[String: String]] = []
        var summary: [String: String]?
        for line in r.stderr.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], "not a JSON log line: \(line)")
            if object["msg"] == "progress" { progress.append(object) }
            if object["msg"] == "run summary" { summary = object }
        }
        #expect(progress.count >= 2, "\(r.stderr.suffix(600))")
        for p in progress {
            for key in ["run", "done", "failed", "total", "elapsed_s", "calls_status", "rate_status"] {
                #expect(p[key] != nil, "progress line without \(key): \(p)")
            }
            #expect(p["total"] == "300")
        }
        let done = progress.compactMap { $0["done"].flatMap(Int.init) }
        #expect(done == done.sorted(), "done went backwards: \(done)")
        let s = try #require(summary, "no run summary line: \(r.stderr.suffix(600))")
        #expect(s["outcome"] == "finished")
        #expect(s["exit_code"] == "0")
        #expect(s["run"] == "1")
        #expect(s["polled"] == "300")
        #expect((s["duration_s"].flatMap(Double.init) ?? 0) > 1)
        #expect(s["polling_s"] != nil && s["until_first_batch_s"] != nil && s["after_last_batch_s"] != nil)

        // Secrets and payloads stay out of the logs.
        for secret in [world.env["APPSTORE_SHARED_SECRET"], world.env["APPSTORE_ISSUER_ID"], world.env["APPSTORE_PRIVATE_KEY_PATH"]].compactMap({ $0 }) {
            #expect(!r.stderr.contains(secret))
        }
        #expect(!r.stderr.contains("eyJ"), "a JWS or JWT in the logs")
    }

    @Test("on a terminal: one progress line redrawn in place with done/total, rates and ETA")
    func terminalProgressLine() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else {
            Issue.record("util-linux script(1) is needed to give churnwatch a terminal")
            return
        }
        let world = try await World.make(subscribers: 200, seed: 34)
        defer { world.close() }
        try world.sim.setClock(Self.iso(Self.start))
        let command = ([CLIRunner.binary.path, "run", "--as-of", Self.iso(Self.start), "--status-rate", "150", "--history-rate", "150",
                        "--log-level", "warning"]).map { "'\($0)'" }.joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qefc", command + " 2>&1", "/dev/null"]
        var env = world.env
        env["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        env["CHURNWATCH_MIGRATIONS_DIR"] = CLIRunner.migrationsDirectory
        env["CHURNWATCH_NOTIFICATIONS"] = "off"  // every subscription due, as the counts below say
        process.environment = env
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = FileHandle.nullDevice
        try CLIRunner.spawn(process)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let status = ChildExit.status(of: process)
        let text = String(decoding: data, as: UTF8.self)
        #expect(status == 0, "\(text.suffix(600))")
        // (The terminal turns each line feed into \r\n; a redraw is a \r before "run 1  ".)
        #expect(text.components(separatedBy: "\rrun 1  ").count - 1 >= 2, "no line redrawn in place: \(text.debugDescription.suffix(600))")
        #expect(text.contains("run 1  200/200 100.0%  0 failed  ETA done  "), "\(text.debugDescription.suffix(600))")
        #expect(text.contains("  status "), "\(text.debugDescription.suffix(600))")
        #expect(text.contains("run 1 done: 200 due, 200 polled"), "\(text.suffix(600))")
        #expect(!text.contains("\"msg\":\"progress\""), "log lines on a terminal")
    }
}

/// A strict reader of Prometheus' text exposition format 0.0.4: HELP and TYPE once per family
/// and before its samples, a family's samples together, valid names, label values with only
/// the three escapes, no series twice, and a line feed at the end.
struct PrometheusText {
    struct Sample: CustomStringConvertible {
        var name: String
        var labels: [String: String]
        var value: Double
        var description: String { "\(name)\(labels) \(value)" }
    }

    struct Family {
        var help: String?
        var type: String?
        var samples: [Sample] = []
    }

    var families: [String: Family] = [:]

    func samples(_ name: String) -> [Sample] { families[name]?.samples ?? [] }

    /// The sample of `name` with `labels`; the app's `bundle_id` label is left out of the
    /// comparison unless `labels` names it.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples(name).first { labels["bundle_id"] == nil ? $0.labels.filter { $0.key != "bundle_id" } == labels : $0.labels == labels }?.value
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*` (metric names; label names without the colon).
    static func isName(_ s: String, colon: Bool) -> Bool {
        func letter(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("A"..."Z").contains(c) || c == "_" || (colon && c == ":") }
        guard let first = s.unicodeScalars.first, letter(first) else { return false }
        return s.unicodeScalars.allSatisfy { letter($0) || ("0"..."9").contains($0) }
    }

    /// A decimal float as Go's ParseFloat reads it (no hex, no leading '+').
    static func isNumber(_ s: String) -> Bool {
        var rest = Substring(s)
        if rest.first == "-" { rest = rest.dropFirst() }
        let mantissa = rest.prefix { $0 != "e" && $0 != "E" }
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) && $0.allSatisfy(\.isASCII) }) else { return false }
        var exponent = rest.dropFirst(mantissa.count)
        if exponent.isEmpty { return true }
        exponent = exponent.dropFirst()
        if exponent.first == "-" || exponent.first == "+" { exponent = exponent.dropFirst() }
        return !exponent.isEmpty && exponent.allSatisfy { $0.isASCII && $0.isNumber }
    }

    static func parse(_ text: String) throws -> PrometheusText {
        guard text.hasSuffix("\n") else { throw ParseError(description: "no line feed at the end") }
        var result = PrometheusText()
        var seenSeries = Set<String>()
        var finished = Set<String>()
        var current: String?
        for (index, raw) in text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw)
            func fail(_ why: String) -> ParseError { ParseError(description: "line \(index + 1) \(why): \(line)") }
            if line.isEmpty { throw fail("is empty") }
            if line.hasPrefix("#") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
                guard parts.count >= 3, parts[0] == "#", parts[1] == "HELP" || parts[1] == "TYPE" else { continue }
                let name = parts[2]
                guard isName(name, colon: true) else { throw fail("names no valid metric") }
                if current != name, let current { finished.insert(current) }
                guard !finished.contains(name) else { throw fail("comes after the family's samples ended") }
                current = name
                var family = result.families[name] ?? Family()
                guard family.samples.isEmpty else { throw fail("comes after samples of its family") }
                let rest = parts.count > 3 ? parts[3] : ""
                if parts[1] == "HELP" {
                    guard family.help == nil else { throw fail("repeats HELP") }
                    guard !rest.contains(where: { $0 == "\n" }) else { throw fail("has a raw line feed") }
                    family.help = rest
                } else {
                    guard family.type == nil else { throw fail("repeats TYPE") }
                    guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(rest) else { throw fail("has an unknown type") }
                    family.type = rest
                }
                result.families[name] = family
                continue
            }
            let sample = try parseSample(line, fail: fail)
            if current != sample.name {
                if let current { finished.insert(current) }
                guard !finished.contains(sample.name) else { throw fail("splits its family") }
                current = sample.name
            }
            let key = sample.name + sample.labels.sorted { $0.key < $1.key }.description
            guard seenSeries.insert(key).inserted else { throw fail("repeats a series") }
            result.families[sample.name, default: Family()].samples.append(sample)
        }
        for (name, family) in result.families where family.help == nil || family.type == nil {
            throw ParseError(description: "\(name) lacks HELP or TYPE")
        }
        return result
    }

    static func parseSample(_ line: String, fail: (String) -> ParseError) throws -> Sample {
        let chars = Array(line.unicodeScalars)
        var i = 0
        var name = ""
        while i < chars.count, chars[i] != "{", chars[i] != " " { name.unicodeScalars.append(chars[i]); i += 1 }
        guard isName(name, colon: true) else { throw fail("has an invalid metric name") }
        var labels: [String: String] = [:]
        if i < chars.count, chars[i] == "{" {
            i += 1
            while true {
                guard i < chars.count else { throw fail("ends inside its labels") }
                if chars[i] == "}" { i += 1; break }
                var label = ""
                while i < chars.count, chars[i] != "=" { label.unicodeScalars.append(chars[i]); i += 1 }
                guard isName(label, colon: false) else { throw fail("has an invalid label name") }
                guard labels[label] == nil else { throw fail("repeats a label") }
                i += 1
                guard i < chars.count, chars[i] == "\"" else { throw fail("has an unquoted label value") }
                i += 1
                var value = ""
                while true {
                    guard i < chars.count else { throw fail("ends inside a label value") }
                    let c = chars[i]
                    if c == "\"" { i += 1; break }
                    if c == "\\" {
                        guard i + 1 < chars.count else { throw fail("ends inside an escape") }
                        switch chars[i + 1] {
                        case "\\": value += "\\"
                        case "\"": value += "\""
                        case "n": value += "\n"
                        default: throw fail("has an unknown escape")
                        }
                        i += 2
                        continue
                    }
                    value.unicodeScalars.append(c)
                    i += 1
                }
                labels[label] = value
                guard i < chars.count else { throw fail("ends inside its labels") }
                if chars[i] == "," { i += 1 } else if chars[i] != "}" { throw fail("has junk between labels") }
            }
        }
        guard i < chars.count, chars[i] == " " else { throw fail("has no space before the value") }
        let fields = String(String.UnicodeScalarView(chars[(i + 1)...])).split(separator: " ", omittingEmptySubsequences: false)
        guard (1...2).contains(fields.count) else { throw fail("has junk after the value") }
        let valueText = String(fields[0])
        let value: Double
        switch valueText {
        case "NaN": value = .nan
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        default:
            guard isNumber(valueText), let v = Double(valueText) else {
                throw fail("has an invalid value")
            }
            value = v
        }
        if fields.count == 2 {
            guard Int64(fields[1]) != nil else { throw fail("has an invalid timestamp") }
        }
        return Sample(name: name, labels: labels, value: value)
    }
}
