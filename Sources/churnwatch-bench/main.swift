import AppStoreServerAPI
import Foundation
import Postgres

// churnwatch-bench MODE: benchmarks for ops/bench. Each prints `key=value` lines.
//   pg                         COPY and batched upsert throughput for 100,000 rows (DATABASE_URL)
//   http URL TOKEN [C] [N]     raw HTTP transport throughput against a URL (the simulator);
//                              TOKEN "env" mints one from the APPSTORE_* environment
//   jws [--seconds S]          JWS verification on one core: jws_verify_per_s (warm chain
//                              cache), jws_verify_cold_per_s (a new verifier per payload)
//   jws-parts [--seconds S]    the pieces of a warm verification
//   history-dump FROM TO       Get Notification History's signed payloads, one per line
//   serve-load URL FILE ...    post those payloads to `churnwatch serve` (ServeLoad)
// Build with -c release for meaningful figures.

let usage = "usage: churnwatch-bench pg | http URL TOKEN [CONCURRENCY] [REQUESTS] | jws [--seconds S] | jws-parts [--seconds S] | history-dump FROM TO | serve-load URL FILE [--concurrency C] [--rate R] [--out FILE]\n"
let arguments = CommandLine.arguments.dropFirst()
guard let mode = arguments.first else {
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}

/// `--seconds S` among the arguments (default 3).
func secondsArgument() throws -> Double {
    let a = Array(arguments.dropFirst())
    guard let i = a.firstIndex(of: "--seconds") else { return 3 }
    guard i + 1 < a.count, let s = Double(a[i + 1]), s > 0 else { throw BenchError("--seconds takes a positive number") }
    return s
}

do {
    switch mode {
    case "http":
        let a = Array(arguments.dropFirst())
        guard a.count >= 2, let url = URL(string: a[0]) else { throw BenchError("usage: churnwatch-bench http URL TOKEN [CONCURRENCY] [REQUESTS]") }
        // TOKEN "env": mint one from the APPSTORE_* environment (as churnwatch does).
        var token = a[1]
        if token == "env" {
            let configuration = try AppStoreConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
            token = try AppStoreTokenProvider(issuerId: configuration.issuerId, keyId: configuration.keyId, bundleId: configuration.bundleId,
                                              privateKey: configuration.signingKey.key).token()
        }
        try await HTTPBenchmark(url: url, token: token, concurrency: a.count > 2 ? Int(a[2]) ?? 32 : 32, requests: a.count > 3 ? Int(a[3]) ?? 5000 : 5000,
                                transport: NIOHTTPTransport.shared).run()
    case "pg":
        try PostgresBenchmark(rows: Int(ProcessInfo.processInfo.environment["BENCH_ROWS"] ?? "") ?? 100_000).run()
    case "jws":
        try await JWSBenchmark(seconds: try secondsArgument()).run()
    case "jws-parts":
        try await JWSBenchmark(seconds: try secondsArgument()).parts()
    case "history-dump":
        let a = Array(arguments.dropFirst())
        let iso = Date.ISO8601FormatStyle()
        guard a.count == 2, let from = try? iso.parse(a[0]), let to = try? iso.parse(a[1]) else {
            throw BenchError("usage: churnwatch-bench history-dump FROM TO (ISO 8601)")
        }
        try await HistoryDump(from: from, to: to).run()
    case "serve-load":
        try await ServeLoad.parse(Array(arguments.dropFirst())).run()
    default:
        FileHandle.standardError.write(Data("churnwatch-bench: unknown mode \(mode)\n\(usage)".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("churnwatch-bench: \(error)\n".utf8))
    exit(1)
}
