import AppStoreModels
import AppStoreServerAPI
import Foundation
import Synchronization

/// `serve-load URL FILE [--concurrency C] [--rate R] [--out FILE] [--bodies FILE]`: posts each signed payload of
/// FILE (one per line) once to `churnwatch serve`, as Apple delivers: `{"signedPayload": ...}`.
/// With `--rate`, a steady stream of R requests/s (each sent at its moment, whatever the answers
/// before it); without, as fast as C connections allow. Prints `load_*` lines; `--out` gets one
/// line per request: the notification's UUID, the wall time it was sent (ms since 1970), its
/// status (0: no answer) and the milliseconds to the answer; `--bodies` one line per request: its
/// status, a space and the answer's body (the cancel page's answers, checked by the bench).
struct ServeLoad {
    var url: URL
    var payloads: [String]
    var concurrency: Int
    var rate: Double?
    var out: String?
    var bodiesOut: String? = nil

    static func parse(_ a: [String]) throws -> ServeLoad {
        guard a.count >= 2, let url = URL(string: a[0]) else {
            throw BenchError("usage: churnwatch-bench serve-load URL FILE [--concurrency C] [--rate R] [--out FILE] [--bodies FILE]")
        }
        func option(_ name: String) -> String? { a.firstIndex(of: name).flatMap { $0 + 1 < a.count ? a[$0 + 1] : nil } }
        let lines = try String(contentsOfFile: a[1], encoding: .utf8).split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        return ServeLoad(url: url, payloads: lines, concurrency: Int(option("--concurrency") ?? "") ?? 32,
                         rate: option("--rate").flatMap(Double.init), out: option("--out"), bodiesOut: option("--bodies"))
    }

    /// `notificationUUID` of a signed payload, read without verifying (the bench's own input).
    static func uuid(_ jws: String) -> String {
        let parts = jws.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URL.decode(utf8: ArraySlice(parts[1])) else { return "-" }
        struct Claim: Decodable { var notificationUUID: String? }
        return (try? JSONDecoder().decode(Claim.self, from: Data(bytes)))?.notificationUUID ?? "-"
    }

    /// What the connections share: the next payload to send, and each request's result.
    final class Shared: Sendable {
        let next = Atomic<Int>(0)
        let results: Mutex<[(sent: Double, status: Int, ms: Double)]>
        let bodies: Mutex<[String]>
        init(count: Int) {
            results = Mutex(Array(repeating: (0, 0, 0), count: count))
            bodies = Mutex(Array(repeating: "", count: count))
        }
    }

    func run() async throws {
        let transport = NIOHTTPTransport.shared
        let bodies = payloads.map { Data("{\"signedPayload\":\"\($0)\"}".utf8) }
        let uuids = out == nil ? [] : payloads.map(Self.uuid)
        let shared = Shared(count: bodies.count)
        let start = Date()
        let url = self.url, rate = self.rate, keepBodies = bodiesOut != nil
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(1, concurrency) {
                group.addTask {
                    while true {
                        let i = shared.next.add(1, ordering: .relaxed).oldValue
                        guard i < bodies.count else { return }
                        if let rate {
                            let due = start.addingTimeInterval(Double(i) / rate)
                            let wait = due.timeIntervalSinceNow
                            if wait > 0 { try? await Task.sleep(for: .seconds(wait)) }
                        }
                        let sent = Date()
                        let request = HTTPRequest(method: "POST", url: url, headers: [("Content-Type", "application/json")], body: bodies[i], timeout: 30)
                        let response = try? await transport.send(request)
                        let ms = Date().timeIntervalSince(sent) * 1000
                        shared.results.withLock { $0[i] = (sent.timeIntervalSince1970 * 1000, response?.status ?? 0, ms) }
                        if keepBodies, let response {
                            let text = String(decoding: response.body, as: UTF8.self).replacingOccurrences(of: "\n", with: " ")
                            shared.bodies.withLock { $0[i] = text }
                        }
                    }
                }
            }
        }
        let wall = Date().timeIntervalSince(start)
        let all = shared.results.withLock { $0 }
        let ok = all.filter { $0.status == 200 }.count
        print("load_requests=\(all.count)")
        print("load_ok=\(ok)")
        print("load_seconds=\(String(format: "%.2f", wall))")
        print("load_requests_per_s=\(Int(Double(all.count) / wall))")
        let latencies = all.map(\.ms).sorted()
        if !latencies.isEmpty {
            print("load_answer_p50_ms=\(String(format: "%.1f", latencies[latencies.count / 2]))")
            print("load_answer_p99_ms=\(String(format: "%.1f", latencies[min(latencies.count - 1, latencies.count * 99 / 100)]))")
        }
        if let bodiesOut {
            let bodies = shared.bodies.withLock { $0 }
            let text = zip(all, bodies).map { "\($0.status) \($1)" }.joined(separator: "\n")
            try Data((text + "\n").utf8).write(to: URL(fileURLWithPath: bodiesOut))
        }
        if let out {
            let text = zip(uuids, all).map { u, r in "\(u) \(String(format: "%.1f", r.sent)) \(r.status) \(String(format: "%.1f", r.ms))" }.joined(separator: "\n")
            try Data((text + "\n").utf8).write(to: URL(fileURLWithPath: out))
        }
    }
}
