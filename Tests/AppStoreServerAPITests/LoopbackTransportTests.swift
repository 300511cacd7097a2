@testable import AppStoreServerAPI
import Foundation
import Logging
import Testing

/// The client over real HTTP: the NIO transport to a server on a loopback address.
@Suite("NIO transport over loopback HTTP")
struct LoopbackTransportTests {
    /// These exchanges are expected to succeed: a timeout this long only stops a hung test, so a
    /// suite starving the cooperative pool on 2 cores cannot turn an answer into a timeout.
    static let loadedMachineTimeout: TimeInterval = 60

    @Test func statusAndHistoryOverRealHTTP() async throws {
        let pki = try TestPKI()
        let responses = Responses(pki: pki)
        let status = try JSONEncoder().encode(try responses.status())
        let page0 = try JSONEncoder().encode(try responses.history(page: 0, of: 2))
        let page1 = try JSONEncoder().encode(try responses.history(page: 1, of: 2))
        let server = try LoopbackHTTPServer { request in
            if request.target.hasPrefix("/inApps/v1/subscriptions/") { return .init(status: 200, headers: ["Content-Type": "application/json"], body: status) }
            if request.target.hasPrefix("/inApps/v2/history/") {
                return .init(status: 200, body: request.target.contains("revision=rev-1") ? page1 : page0)
            }
            return .init(status: 404, body: Data(#"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#.utf8))
        }
        defer { server.stop() }

        let configuration = TestConfiguration.make(pki: pki, baseURL: server.baseURL, sandboxBaseURL: server.baseURL, requestTimeout: Self.loadedMachineTimeout)
        let client = AppStoreServerAPIClient(configuration: configuration, transport: NIOHTTPTransport.shared, logger: .silent)

        let outcome = await client.subscriptionStatuses(for: "2000000000000001")
        #expect(outcome.value?.subscriptions.first?.renewalInfo?.autoRenewStatus == .on, "\(outcome)")
        let history = await client.transactionHistory(for: "2000000000000001", filters: .init(revoked: true))
        #expect(history.value?.transactions.count == 4, "\(history)")
        let missing = await client.transactionInfo(for: "42")
        #expect(missing.isTransactionUnknownInEnvironment, "\(missing)")

        // Concurrent calls share keep-alive connections.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<16 { group.addTask { _ = await client.subscriptionStatuses(for: "2000000000000001") } }
        }

        let requests = server.requests
        #expect(requests.count == 20)
        #expect(requests[0].target == "/inApps/v1/subscriptions/2000000000000001")
        #expect(requests[0].headers["authorization"]?.hasPrefix("Bearer ey") == true)
        #expect(requests[1].target == "/inApps/v2/history/2000000000000001?revoked=true")
        #expect(requests[2].target == "/inApps/v2/history/2000000000000001?revision=rev-1&revoked=true")
        #expect(server.connectionCount <= 17)
    }

    @Test func verifyReceiptPostsToTheOverriddenBase() async throws {
        let server = try LoopbackHTTPServer { request in
            let body = #"{"status":0,"environment":"Production","latest_receipt":"TkVX","latest_receipt_info":[{"transaction_id":"1","original_transaction_id":"1","expires_date_ms":"1700000000000","is_trial_period":"false"}]}"#
            return .init(status: request.method == "POST" && request.target == "/verifyReceipt" ? 200 : 404, body: Data(body.utf8))
        }
        defer { server.stop() }
        let configuration = TestConfiguration.make(pki: try TestPKI(), baseURL: server.baseURL, requestTimeout: Self.loadedMachineTimeout)
        let client = AppStoreServerAPIClient(configuration: configuration, transport: NIOHTTPTransport.shared, logger: .silent)
        let outcome = await client.verifyReceipt("T0xE", excludeOldTransactions: true)
        let result = try #require(outcome.value, "\(outcome)")
        #expect(result.latestReceipt == "TkVX")
        #expect(result.response.latestReceiptInfo?.first?.expiresDate == 1_700_000_000_000)
        let sent = try JSONSerialization.jsonObject(with: try #require(server.requests.first).body) as? [String: Any]
        #expect(sent?["receipt-data"] as? String == "T0xE")
        #expect(sent?["password"] as? String == "cafebabe")
        #expect(sent?["exclude-old-transactions"] as? Bool == true)
    }

    /// The shared transport pools kept-alive connections by host and port. A test server that
    /// went on answering over them after `stop()` answered for the next server at its address
    /// (before the fix: 20 of 20 requests).
    @Test func aStoppedServerNeverAnswersForTheNextOnItsPort() async throws {
        var stale = 0, answered = 0
        for _ in 0..<20 {
            let first = try LoopbackHTTPServer { _ in .init(status: 200, body: Data("first".utf8)) }
            let request = HTTPRequest(method: "GET", url: first.baseURL.appendingPathComponent("x"), timeout: Self.loadedMachineTimeout)
            _ = try await NIOHTTPTransport.shared.send(request)
            first.stop()
            // Another test's socket may have taken the port in between: then there is nothing to ask.
            guard let second = try? LoopbackHTTPServer(host: first.host, port: first.port, handler: { _ in .init(status: 200, body: Data("second".utf8)) }) else { continue }
            defer { second.stop() }
            // The pooled connection may be found closed, a connection error the client retries
            // (so does this test, once); it must never bring the stopped server's answer.
            var response = try? await NIOHTTPTransport.shared.send(request)
            if response == nil { response = try? await NIOHTTPTransport.shared.send(request) }
            guard let response else { continue }
            answered += 1
            if response.body != Data("second".utf8) { stale += 1 }
        }
        #expect(answered > 0)
        #expect(stale == 0, "\(stale) of \(answered) answers came from a stopped server")
        print("stopped servers: \(answered) of 20 requests answered by the server now on the port, \(stale) by a stopped one")
    }

    @Test func connectionRefusedIsRetryable() async throws {
        // A port held bound but not listening refuses every connection, and no other test's
        // server can take it meanwhile (a stopped server's port could be, and then hang).
        let closed = try ClosedPort()
        defer { closed.close() }
        let url = URL(string: "http://127.0.0.1:\(closed.port)")!
        let clock = TestClock()
        let configuration = TestConfiguration.make(pki: try TestPKI(), baseURL: url, retry: RetryPolicy(maxAttempts: 2))
        let client = AppStoreServerAPIClient(configuration: configuration, transport: NIOHTTPTransport.shared, clock: clock, random: { 0 }, logger: .silent)
        let outcome = await client.transactionInfo(for: "1")
        guard case .retryable(.connection) = outcome else { Issue.record("\(outcome)"); return }
    }
}

@Suite("NIOHTTPTransport deadline and cancellation")
struct NIOHTTPTransportDeadlineTests {
    @Test func aServerThatNeverAnswersTimesOut() async throws {
        // Accepts the connection, reads the request, never answers.
        let server = try LoopbackHTTPServer(hang: true) { _ in .init(status: 200) }
        defer { server.stop() }
        let request = HTTPRequest(method: "GET", url: server.baseURL.appendingPathComponent("slow"), timeout: 0.3)
        await #expect(throws: HTTPTransportError.timeout) { try await NIOHTTPTransport.shared.send(request) }
    }

    @Test func cancellingARequestEndsItWithCancellationError() async throws {
        // A graceful shutdown cancels requests in flight: they must end at once, as cancelled.
        let server = try LoopbackHTTPServer(hang: true) { _ in .init(status: 200) }
        defer { server.stop() }
        let request = HTTPRequest(method: "GET", url: server.baseURL.appendingPathComponent("slow"), timeout: 600)
        let task = Task { try await NIOHTTPTransport.shared.send(request) }
        // Cancel once the server holds the request (it records it before hanging). Waited for on
        // a thread of its own: a loop of Task.yield on one of the two cooperative threads of a
        // loaded machine kept the request from being sent for 30 s.
        let reached = await server.waitForRequest(timeout: 120)
        try #require(reached && !server.requests.isEmpty, "the request never reached the server")
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}

/// A loopback TCP port bound and never listened on: connecting to it is refused at once.
struct ClosedPort {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = fd >= 0 && withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw CocoaError(.fileWriteUnknown) }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(fd) }
}
