import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// ``HTTPTransport`` on SwiftNIO (AsyncHTTPClient): HTTP/1.1 keep-alive connections (HTTP/2
/// where TLS offers it, as Apple's servers do), pooled per host, on one event-loop thread.
///
/// One client serves the whole process (``shared``): its connection pool and event loop live as
/// long as the process, so there is nothing to shut down. Redirects are refused, responses are
/// not decompressed, and a response body over 16 MiB is an error: Apple's answers are small JSON.
public struct NIOHTTPTransport: HTTPTransport {
    /// The process's transport.
    public static let shared = NIOHTTPTransport(client: sharedClient)

    private let client: HTTPClient
    private static let maximumBodyBytes = 16 << 20

    private init(client: HTTPClient) { self.client = client }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
        if let body = request.body {
            outgoing.body = .bytes(ByteBuffer(bytes: body))
            outgoing.headers.replaceOrAdd(name: "Content-Length", value: String(body.count))
        }
        do {
            let response = try await client.execute(outgoing, deadline: .now() + .nanoseconds(Int64(max(0.001, request.timeout) * 1e9)))
            let body = try await response.body.collect(upTo: Self.maximumBodyBytes)
            var headers: [String: String] = [:]
            headers.reserveCapacity(response.headers.count)
            for (name, value) in response.headers where headers[name.lowercased()] == nil {
                headers[name.lowercased()] = value
            }
            return HTTPResponse(lowercasedHeaders: headers, status: Int(response.status.code),
                                body: body.withUnsafeReadableBytes { Data($0) })
        } catch let error as HTTPClientError {
            if Task.isCancelled || error == .cancelled { throw CancellationError() }
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                throw HTTPTransportError.timeout
            default:
                throw HTTPTransportError.connection("\(error)")
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as HTTPTransportError {
            throw error
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw HTTPTransportError.connection("\(error)")
        }
    }
}

/// Built on first use and never shut down (it lives as long as the process).
private let sharedClient: HTTPClient = {
    var configuration = HTTPClient.Configuration(
        redirectConfiguration: .disallow,
        timeout: .init(connect: .seconds(10)),
        // Connections are opened on demand; the worker keeps `--concurrency` requests in flight.
        connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 512),
        decompression: .disabled)
    configuration.httpVersion = .automatic
    // A refused or failed connection is reported at once; the client's retry policy (backoff,
    // attempts, the outage rule) decides what happens next, not a second retry loop in here.
    configuration.connectionPool.retryConnectionEstablishment = false
    return HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup(numberOfThreads: 1)), configuration: configuration)
}()
