import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// What the door counts while it runs (read by `/metrics` and by the drain).
public final class DoorCounters: Sendable {
    /// Connections open now.
    public let connections = Atomic<Int>(0)
    /// Connections closed at once because `maxConnections` were open.
    public let refused = Atomic<Int>(0)
    /// Requests read whole and not answered yet.
    public let inFlight = Atomic<Int>(0)
    /// Set when the drain began: answers close their connection.
    let draining = Atomic<Bool>(false)

    public init() {}
}

/// `churnwatch serve`'s HTTP/1.1 listener on SwiftNIO (plain, or TLS with swift-nio-ssl): it
/// reads each request whole within ``DoorLimits`` and hands it to a route off the event loop.
public final class HTTPDoor: Sendable {
    public let port: Int
    public let counters: DoorCounters
    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel

    private init(port: Int, counters: DoorCounters, group: MultiThreadedEventLoopGroup, listener: any Channel) {
        (self.port, self.counters, self.group, self.listener) = (port, counters, group, listener)
    }

    /// Binds `host:port` (0: a free port) and serves `route` until ``drain()``.
    public static func start(host: String, port: Int, limits: DoorLimits, tls: NIOSSLContext?, counters: DoorCounters = DoorCounters(),
                             route: @escaping ServeRoute) async throws -> HTTPDoor {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, System.coreCount))
        do {
            let listener = try await ServerBootstrap(group: group)
                .serverChannelOption(.backlog, value: 1024)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelOption(.maxMessagesPerRead, value: 16)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try Self.admit(channel, limits: limits, tls: tls, counters: counters, route: route)
                    }
                }
                .bind(host: host, port: port).get()
            return HTTPDoor(port: listener.localAddress?.port ?? port, counters: counters, group: group, listener: listener)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// A new connection: closed at once past the cap, else given its pipeline.
    private static func admit(_ channel: any Channel, limits: DoorLimits, tls: NIOSSLContext?, counters: DoorCounters,
                              route: @escaping ServeRoute) throws {
        let open = counters.connections.add(1, ordering: .relaxed).newValue
        channel.closeFuture.whenComplete { _ in counters.connections.subtract(1, ordering: .relaxed) }
        guard open <= limits.maxConnections, !counters.draining.load(ordering: .relaxed) else {
            counters.refused.add(1, ordering: .relaxed)
            channel.close(promise: nil)
            return
        }
        let pipeline = channel.pipeline.syncOperations
        if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls)) }
        try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
        try pipeline.addHandler(DoorHandler(limits: limits, counters: counters, route: route))
    }

    /// Stops accepting, lets the requests in flight be answered (until they are, or the calling
    /// task is cancelled: the stop's grace is over), then closes every connection. True when
    /// nothing was in flight at the end.
    @discardableResult
    public func drain() async -> Bool {
        counters.draining.store(true, ordering: .relaxed)
        try? await listener.close()
        while counters.inFlight.load(ordering: .relaxed) > 0, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let idle = counters.inFlight.load(ordering: .relaxed) == 0
        try? await group.shutdownGracefully()
        return idle
    }

    /// TLS from PEM files: the certificate chain (leaf first) and its private key.
    public static func tlsContext(certificateFile: String, keyFile: String) throws -> NIOSSLContext {
        let chain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(file: keyFile, format: .pem)
        return try NIOSSLContext(configuration: .makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key)))
    }
}
