import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The project's App Store simulator (`appstore-sim serve`) as a child process on loopback,
/// with its clock, ground truth and stats read over HTTP, exactly as an operator would.
final class SimulatorProcess: @unchecked Sendable {
    let process: Process
    let directory: URL
    let productionURL: String
    let sandboxURL: String
    /// KEY=VALUE settings from its churnwatch.env (APPSTORE_*).
    let environment: [String: String]

    static var binary: URL {
        CLIRunner.binary.deletingLastPathComponent().appendingPathComponent("appstore-sim")
    }

    /// Starts the simulator and waits (bounded, on a thread of its own) until it says it is listening.
    static func start(subscribers: Int, seed: Int, start: String, extra: [String] = [],
                      ports: (production: Int, sandbox: Int)? = nil, directory: URL? = nil) async throws -> SimulatorProcess {
        try await OwnThread.run {
            try startBlocking(subscribers: subscribers, seed: seed, start: start, extra: extra, ports: ports, directory: directory)
        }
    }

    /// `start` for code already on a thread of its own.
    ///
    /// - Parameters:
    ///   - ports: the production and sandbox ports of an earlier simulator (a restart "at the
    ///     same address"); free ports when nil.
    ///   - directory: reuse the files (keys, root, env) of an earlier simulator; a new one when nil.
    static func startBlocking(subscribers: Int, seed: Int, start: String, extra: [String] = [],
                              ports: (production: Int, sandbox: Int)? = nil, directory: URL? = nil) throws -> SimulatorProcess {
        let dir = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("cw-sim-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = binary
        process.arguments = ["serve", "--subscribers", String(subscribers), "--seed", String(seed), "--start", start,
                             "--port", String(ports?.production ?? 0)] + (ports.map { ["--sandbox-port", String($0.sandbox)] } ?? []) + ["--pki-dir", dir.appendingPathComponent("pki").path] + extra
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try CLIRunner.spawn(process)
        // Read its output until the "listening" line (the server is bound when it prints it).
        var buffer = Data()
        let handle = out.fileHandleForReading
        let deadline = Date().addingTimeInterval(120)
        var ports: (Int, Int)?
        while ports == nil, Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            let text = String(decoding: buffer, as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }) {
                var p = 0, s = 0
                for field in line.split(separator: " ") {
                    let kv = field.split(separator: "=")
                    if kv.count == 2, kv[0] == "production_port" { p = Int(kv[1]) ?? 0 }
                    if kv.count == 2, kv[0] == "sandbox_port" { s = Int(kv[1]) ?? 0 }
                }
                ports = (p, s)
            }
        }
        guard let ports, ports.0 > 0 else {
            process.terminate()
            throw CLITestError("appstore-sim did not start: \(String(decoding: buffer, as: UTF8.self).prefix(500))")
        }
        // Keep draining its output so it never blocks on a full pipe.
        // (Removed at the end of the stream, when it exited: see CLIRunner.spawn.)
        handle.readabilityHandler = { h in if h.availableData.isEmpty { h.readabilityHandler = nil } }
        let envText = try String(contentsOf: dir.appendingPathComponent("pki/churnwatch.env"), encoding: .utf8)
        var env: [String: String] = [:]
        for line in envText.split(separator: "\n") where line.contains("=") && !line.hasPrefix("#") {
            let parts = line.split(separator: "=", maxSplits: 1)
            env[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return SimulatorProcess(process: process, directory: dir,
                                productionURL: "http://127.0.0.1:\(ports.0)", sandboxURL: "http://127.0.0.1:\(ports.1)",
                                environment: env)
    }

    private init(process: Process, directory: URL, productionURL: String, sandboxURL: String, environment: [String: String]) {
        self.process = process
        self.directory = directory
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.environment = environment
    }

    var subscriptionsCSV: URL { directory.appendingPathComponent("pki/subscriptions.csv") }

    /// Stops the simulator (SIGTERM; SIGKILL if it is not gone within 60 s) and waits for its exit.
    func stop(keepingFiles: Bool = false) {
        if process.isRunning { process.terminate() }
        _ = ChildExit.wait(for: process, killingAfter: 60)
        if !keepingFiles { try? FileManager.default.removeItem(at: directory) }
    }

    /// The ports it listens on (to start another one at the same address).
    var ports: (production: Int, sandbox: Int) {
        (URLComponents(string: productionURL)?.port ?? 0, URLComponents(string: sandboxURL)?.port ?? 0)
    }

    // MARK: HTTP

    func request(_ method: String, _ path: String, body: Data? = nil) throws -> Data {
        var req = URLRequest(url: URL(string: productionURL + path)!)
        req.httpMethod = method
        req.httpBody = body
        req.timeoutInterval = 60
        let box = ResultBox()
        let task = URLSession.shared.dataTask(with: req) { data, response, error in
            box.set(data, (response as? HTTPURLResponse)?.statusCode, error)
        }
        task.resume()
        let (data, status, error) = box.wait()
        if let error { throw CLITestError("simulator \(path): \(error)") }
        guard status == 200, let data else { throw CLITestError("simulator \(path): HTTP \(status ?? 0)") }
        return data
    }

    func setClock(_ iso: String) throws {
        _ = try request("POST", "/_sim/clock?set=\(iso)")
    }

    struct TruthSubscription: Decodable {
        var original_transaction_id: String
        var segment: String
        var environment: String?
        var auto_renew: Bool?
        var fault: String?
        var expires_at: String?
    }

    /// The ground truth at `iso`, of the first app or of `bundleId`'s.
    func truth(at iso: String, bundleId: String? = nil) throws -> [String: TruthSubscription] {
        struct Body: Decodable { var subscriptions: [TruthSubscription] }
        let app = bundleId.map { "&bundle_id=\($0)" } ?? ""
        let body = try JSONDecoder().decode(Body.self, from: try request("GET", "/_sim/truth?at=\(iso)\(app)"))
        return Dictionary(body.subscriptions.map { ($0.original_transaction_id, $0) }, uniquingKeysWith: { a, _ in a })
    }

    struct TruthEvent: Decodable, Hashable {
        var original_transaction_id: String
        var event: String
        var occurred_at: String
    }

    func events(from: String, to: String) throws -> [TruthEvent] {
        struct Body: Decodable { var events: [TruthEvent] }
        return try JSONDecoder().decode(Body.self, from: try request("GET", "/_sim/events?from=\(from)&to=\(to)")).events
    }

    struct Stats: Decodable {
        var rate_limited: Int
        var requests: [String: [String: Int]]
    }

    func stats() throws -> Stats {
        try JSONDecoder().decode(Stats.self, from: try request("GET", "/_sim/stats"))
    }
}

/// Blocks until a URLSession callback delivers (tests are synchronous here).
private final class ResultBox: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private var value: (Data?, Int?, (any Error)?) = (nil, nil, nil)
    func set(_ d: Data?, _ s: Int?, _ e: (any Error)?) { value = (d, s, e); semaphore.signal() }
    func wait() -> (Data?, Int?, (any Error)?) { semaphore.wait(); return value }
}
