import AppStoreServerAPI
import Foundation

/// Raw throughput of the HTTP transport against a URL (the simulator): requests/s at a
/// given concurrency, to tell the transport's cost from churnwatch's own.
struct HTTPBenchmark {
    var url: URL
    var token: String
    var concurrency: Int
    var requests: Int
    var transport: any HTTPTransport

    func run() async throws {
        let start = Date()
        let each = requests / concurrency
        let failures = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var failed = 0
                    for _ in 0..<each {
                        let r = try await transport.send(HTTPRequest(method: "GET", url: url, headers: [("Authorization", "Bearer \(token)")], timeout: 30))
                        if r.status != 200 { failed += 1 }
                    }
                    return failed
                }
            }
            var total = 0
            for try await f in group { total += f }
            return total
        }
        let seconds = Date().timeIntervalSince(start)
        print("http_req_per_s=\(Int(Double(each * concurrency) / seconds))")
        print("http_concurrency=\(concurrency)")
        print("http_failures=\(failures)")
    }
}
