import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import X509
import SwiftASN1

/// ``HTTPTransport`` on SwiftNIO (AsyncHTTPClient): HTTP/1.1 keep-alive connections (HTTP/2
/// where TLS offers it, as Apple's servers do), pooled per host, on one event-loop thread.
///
/// One client serves the whole process (``shared``, or one per set of extra TLS roots from
/// ``forConfiguration(_:)``): its connection pool and event loop live as long as the process, so
/// there is nothing to shut down. Redirects are refused, responses are not decompressed, and a
/// response body over 16 MiB is an error: Apple's answers are small JSON.
///
/// A server certificate that is not trusted (or does not name the host) is
/// ``HTTPTransportError/untrustedServer(_:)``, not a connection failure: no retry will help.
public struct NIOHTTPTransport: HTTPTransport {
    /// The process's transport, trusting the system's CA bundle.
    public static let shared = NIOHTTPTransport(client: makeClient(extraTrustRoots: []))

    /// The transport for `configuration`: ``shared``, or, with
    /// ``AppStoreConfiguration/tlsRootCertificates``, a client that also trusts those roots (one
    /// per distinct set, for the life of the process).
    public static func forConfiguration(_ configuration: AppStoreConfiguration) throws -> NIOHTTPTransport {
        guard !configuration.tlsRootCertificates.isEmpty else { return shared }
        var ders: [[UInt8]] = []
        for certificate in configuration.tlsRootCertificates {
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            ders.append(serializer.serializedBytes)
        }
        return try withRootsClients.withLock { clients in
            if let existing = clients[ders] { return existing }
            let roots = try ders.map { try NIOSSLCertificate(bytes: $0, format: .der) }
            let transport = NIOHTTPTransport(client: makeClient(extraTrustRoots: roots))
            clients[ders] = transport
            return transport
        }
    }

    private static let withRootsClients = Mutex<[[[UInt8]]: NIOHTTPTransport]>([:])

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
            return try await Self.withDeadline(seconds: max(0.001, request.timeout), on: client.eventLoopGroup.any()) { [client, outgoing] in
                // AsyncHTTPClient's deadline ends when the response head arrives; this race
                // also covers the body, so a server dribbling it cannot hold the call.
                let response = try await client.execute(outgoing, deadline: .now() + .nanoseconds(Int64(max(0.001, request.timeout) * 1e9)))
                let body = try await response.body.collect(upTo: Self.maximumBodyBytes)
                var headers: [String: String] = [:]
                headers.reserveCapacity(response.headers.count)
                for (name, value) in response.headers where headers[name.lowercased()] == nil {
                    headers[name.lowercased()] = value
                }
                return HTTPResponse(lowercasedHeaders: headers, status: Int(response.status.code),
                                    body: body.withUnsafeReadableBytes { Data($0) })
            }
        } catch let error as HTTPClientError {
            if Task.isCancelled || error == .cancelled { throw CancellationError() }
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                throw HTTPTransportError.timeout
            default:
                throw HTTPTransportError.connection("\(error)")
            }
        } catch let error as NIOSSLError {
            if case .handshakeFailed(let why) = error, "\(why)".contains("CERTIFICATE_VERIFY_FAILED") {
                throw HTTPTransportError.untrustedServer("\(Self.origin(request.url)) presented a TLS certificate that does not chain to a trusted root")
            }
            throw HTTPTransportError.connection("TLS: \(error)")
        } catch let error as NIOSSLExtraError where error == .failedToValidateHostname {
            throw HTTPTransportError.untrustedServer("\(Self.origin(request.url)) presented a TLS certificate for another host")
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

extension NIOHTTPTransport {
    /// Runs `exchange` (request, response head and the whole body) within `seconds`: when the
    /// time is up first, `exchange` is cancelled (AsyncHTTPClient then closes the connection) and
    /// ``HTTPTransportError/timeout`` is thrown.
    ///
    /// The deadline is a timer on the client's event loop, removed the moment the exchange ends.
    /// (A `Task.sleep` raced against the exchange held its task and timer for the whole timeout
    /// after every answer: at 2,000 calls a second and 30 s, 40 MB, issue 29.)
    package static func withDeadline<T: Sendable>(seconds: TimeInterval, on loop: any EventLoop,
                                                  _ exchange: @escaping @Sendable () async throws -> T) async throws -> T {
        let expired = DeadlineFlag()
        let task = Task { try await exchange() }
        let timer = loop.scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) {
            expired.set()
            task.cancel()
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        } catch {
            // Only the cancellation the deadline caused is a timeout: an error that came first
            // (a refused connection, late to be handled on a busy machine) is that error.
            if expired.isSet && !Task.isCancelled && Self.isCancellation(error) { throw HTTPTransportError.timeout }
            throw error
        }
    }

    package static func isCancellation(_ error: any Error) -> Bool {
        error is CancellationError || (error as? HTTPClientError) == .cancelled
    }

    /// Whether a request's deadline passed (set on the event loop, read by the request).
    private final class DeadlineFlag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    /// scheme://host:port of `url`, for messages (never the path: it carries ids).
    static func origin(_ url: URL) -> String {
        "\(url.scheme ?? "https")://\(url.host ?? "?")\(url.port.map { ":\($0)" } ?? "")"
    }
}

/// A client that lives as long as the process (never shut down); it trusts the system's CA
/// bundle plus `extraTrustRoots`.
private func makeClient(extraTrustRoots: [NIOSSLCertificate]) -> HTTPClient {
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
    if !extraTrustRoots.isEmpty {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.certificates(extraTrustRoots)]
        configuration.tlsConfiguration = tls
    }
    return HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup(numberOfThreads: 1)), configuration: configuration)
}
