import AppStoreServerAPI
import Foundation
import Postgres

// churnwatch-bench MODE: benchmarks for ops/bench. Each prints `key=value` lines.
//   pg   COPY and batched upsert throughput for 100,000 rows (DATABASE_URL)

let arguments = CommandLine.arguments.dropFirst()
guard let mode = arguments.first else {
    FileHandle.standardError.write(Data("usage: churnwatch-bench pg\n".utf8))
    exit(2)
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
    default:
        FileHandle.standardError.write(Data("churnwatch-bench: unknown mode \(mode)\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("churnwatch-bench: \(error)\n".utf8))
    exit(1)
}
