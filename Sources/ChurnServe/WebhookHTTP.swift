import AppStoreServerAPI
import AsyncHTTPClient
import ChurnModel
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// One signed POST to a receiver, as a careful guest: a connect timeout and a bound on the whole
/// exchange, no redirect followed, the answer's body read up to 4 KiB (the rest is not read: the
/// connection is closed), keep-alive connections pooled per host, and the receiver's address
/// checked before each request (``WebhookAddressGuard``) unless the endpoint allows private ones.
public final class WebhookHTTP: Sendable {
    /// What came back (or why nothing did).
    public struct Answer: Sendable, Equatable {
        public var status: Int?
        public var retryAfter: String?
        /// Up to 4 KiB of the body, for `webhooks test` and the last error.
        public var body: String
        public var bodyTruncated = false
        public var error: String?
        public var seconds: Double
    }

    public static let bodyLimit = 4_096
    private static let clients = Mutex<[HTTPClient]>([])
    let client: HTTPClient
    let guardian: WebhookAddressGuard
    let timeout: TimeInterval

    /// - Parameter timeout: the bound on a whole attempt (connect, send, answer), 10 s by default.
    public init(timeout: TimeInterval = 10, connectTimeout: TimeInterval = 5, guardian: WebhookAddressGuard = WebhookAddressGuard()) {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(connectTimeout * 1000)), read: .milliseconds(Int64(timeout * 1000))),
            connectionPool: .init(idleTimeout: .seconds(55), concurrentHTTP1ConnectionsPerHostSoftLimit: 64),
            decompression: .disabled)
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup(numberOfThreads: 1)), configuration: configuration)
        (self.guardian, self.timeout) = (guardian, timeout)
        // Kept for the life of the process (one or two per process): AsyncHTTPClient traps
        // when a client is released without shutdown(), which a command ending on an error,
        // or serve's last line, would otherwise do.
        Self.clients.withLock { $0.append(client) }
    }

    /// Sends `body` to `url`, signed for `id` at `timestamp` (Unix seconds).
    public func post(url: String, allowPrivate: Bool, id: String, timestamp: Int64, body: String, signature: String) async -> Answer {
        let start = ContinuousClock.now
        func seconds() -> Double { let d = ContinuousClock.now - start; return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
        if !allowPrivate, let refused = await guardian.refusal(url) {
            return Answer(status: nil, body: "", error: refused, seconds: seconds())
        }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "churnwatch-webhooks/1")
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(name: "webhook-signature", value: signature)
        request.body = .bytes(ByteBuffer(string: body))
        let outgoing = request
        do {
            var answer = try await NIOHTTPTransport.withDeadline(seconds: timeout, on: client.eventLoopGroup.any()) { [client, timeout] in
                let response = try await client.execute(outgoing, deadline: .now() + .milliseconds(Int64(timeout * 1000)))
                var collected = ByteBuffer()
                var truncated = false
                for try await var chunk in response.body {
                    let room = Self.bodyLimit - collected.readableBytes
                    if chunk.readableBytes > room {
                        var part = chunk.readSlice(length: room) ?? ByteBuffer()
                        collected.writeBuffer(&part)
                        truncated = true
                        break  // the rest is never read: the client closes this connection
                    }
                    collected.writeBuffer(&chunk)
                }
                return Answer(status: Int(response.status.code), retryAfter: response.headers.first(name: "retry-after"),
                              body: String(decoding: collected.readableBytesView, as: UTF8.self), bodyTruncated: truncated,
                              error: nil, seconds: 0)
            }
            answer.seconds = seconds()
            if let status = answer.status, !(200..<300).contains(status) {
                answer.error = Self.describe(status: status, answer.body, location: nil)
            }
            return answer
        } catch {
            return Answer(status: nil, body: "", error: Self.describe(error), seconds: seconds())
        }
    }

    static func describe(status: Int, _ body: String, location: String?) -> String {
        let snippet = body.prefix(200).replacingOccurrences(of: "\n", with: " ")
        if (300..<400).contains(status) { return "HTTP \(status): a redirect, not followed (fix the endpoint's URL)" }
        return "HTTP \(status)" + (snippet.isEmpty ? "" : ": \(snippet)")
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case HTTPTransportError.timeout: return "no answer within the attempt's time limit"
        case let e as HTTPClientError where e == .deadlineExceeded || e == .readTimeout: return "no answer within the attempt's time limit"
        case let e as HTTPClientError where e == .connectTimeout: return "could not connect within the connect timeout"
        case let e as HTTPClientError where e == .remoteConnectionClosed: return "the receiver closed the connection without answering"
        default: return "could not deliver: \(String(describing: error).prefix(300))"
        }
    }

    /// Closes the pooled connections (a command's end; serve's sender lives as long as serve).
    public func shutdown() async {
        try? await client.shutdown()
    }
}
