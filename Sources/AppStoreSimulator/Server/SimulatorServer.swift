import NIOCore
import NIOHTTP1
import NIOPosix

/// The HTTP/1.1 front of a ``SimulatorService``: one listener per environment (Production on
/// `port`, Sandbox on `sandboxPort`), bound to 127.0.0.1 only, keep-alive, one event loop per core.
public final class SimulatorServer: Sendable {
    public let service: SimulatorService
    public let productionPort: Int
    public let sandboxPort: Int
    private let group: MultiThreadedEventLoopGroup
    private let channels: [any Channel]

    private init(service: SimulatorService, group: MultiThreadedEventLoopGroup, channels: [any Channel],
                 productionPort: Int, sandboxPort: Int) {
        self.service = service
        self.group = group
        self.channels = channels
        self.productionPort = productionPort
        self.sandboxPort = sandboxPort
    }

    /// Binds both listeners. Port 0 picks a free port; `sandboxPort` nil means `port + 1`
    /// (or a free port when `port` is 0).
    public static func start(
        service: SimulatorService, host: String = "127.0.0.1", port: Int, sandboxPort: Int? = nil,
        threads: Int = System.coreCount
    ) async throws -> SimulatorServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads))
        do {
            let production = try await bind(service: service, group: group, host: host, port: port, environment: .production)
            let actualPort = production.localAddress?.port ?? port
            let wantedSandbox = sandboxPort ?? (port == 0 ? 0 : actualPort + 1)
            let sandbox: any Channel
            do {
                sandbox = try await bind(service: service, group: group, host: host, port: wantedSandbox, environment: .sandbox)
            } catch {
                try? await production.close()
                throw error
            }
            return SimulatorServer(
                service: service, group: group, channels: [production, sandbox], productionPort: actualPort,
                sandboxPort: sandbox.localAddress?.port ?? wantedSandbox)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func bind(
        service: SimulatorService, group: MultiThreadedEventLoopGroup, host: String, port: Int,
        environment: SimEnvironment
    ) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        SimHTTPHandler(service: service, environment: environment))
                }
            }
            .bind(host: host, port: port).get()
    }

    /// Resolves when the listeners close.
    public func waitUntilClosed() async throws {
        for c in channels { try await c.closeFuture.get() }
    }

    /// Closes the listeners and stops the event loops.
    public func shutdown() async throws {
        for c in channels { try? await c.close() }
        try await group.shutdownGracefully()
    }
}

/// Collects one request and hands it to the service; writes the answer (after any latency), or
/// drops or holds the connection as the service says.
final class SimHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: SimulatorService
    private let environment: SimEnvironment
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?

    init(service: SimulatorService, environment: SimEnvironment) {
        self.service = service
        self.environment = environment
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = nil
        case .body(var b):
            if body == nil { body = b } else { body!.writeBuffer(&b) }
        case .end:
            guard let head else { return }
            self.head = nil
            let (path, query) = SimRequest.split(uri: head.uri)
            let request = SimRequest(
                method: head.method.rawValue, path: path, query: query,
                authorization: head.headers.first(name: "authorization"),
                body: body.map { Array($0.readableBytesView) } ?? [], environment: environment)
            body = nil
            let response = service.handle(request)
            let keepAlive = head.isKeepAlive
            let version = head.version
            if let deferred = response.deferred {
                let promise = context.eventLoop.makePromise(of: SimResponse.self)
                promise.completeWithTask(deferred)
                promise.futureResult.assumeIsolated().whenSuccess { answer in
                    self.write(context: context, answer, version: version, keepAlive: keepAlive)
                }
                return
            }
            switch response.disposition {
            case .drop:
                context.close(promise: nil)
            case .hang(let ms):
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(ms))) {
                    context.close(promise: nil)
                }
            case .respond:
                if response.delayMs > 0 {
                    context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(response.delayMs))) {
                        self.write(context: context, response, version: version, keepAlive: keepAlive)
                    }
                } else {
                    write(context: context, response, version: version, keepAlive: keepAlive)
                }
            }
        }
    }

    private func write(context: ChannelHandlerContext, _ response: SimResponse, version: HTTPVersion, keepAlive: Bool) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders(response.headers)
        headers.add(name: "content-length", value: String(response.body.reduce(0) { $0 + $1.readableBytes }))
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(
                version: version, status: HTTPResponseStatus(statusCode: response.status), headers: headers))),
            promise: nil)
        for b in response.body { context.write(wrapOutboundOut(.body(.byteBuffer(b))), promise: nil) }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
