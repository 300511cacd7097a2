import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP/1.1 keep-alive load generator for `appstore-sim bench`: each connection sends a
/// GET, waits for the answer, sends the next. Loopback only.
public enum LoadGenerator {
    public struct Result: Sendable {
        public var requests: Int
        public var errors: Int
        public var seconds: Double
        public var perSecond: Double { seconds > 0 ? Double(requests) / seconds : 0 }
    }

    /// Sends every path once, spread over `connections` connections.
    public static func once(port: Int, paths: [String], token: String, connections: Int, threads: Int = 1) async throws -> Result {
        try await run(port: port, paths: paths, token: token, connections: connections, threads: threads, seconds: nil)
    }

    /// Cycles through `paths` for `seconds` on `connections` connections.
    public static func timed(port: Int, paths: [String], token: String, connections: Int, seconds: Double, threads: Int = 1)
        async throws -> Result
    {
        try await run(port: port, paths: paths, token: token, connections: connections, threads: threads, seconds: seconds)
    }

    private static func run(port: Int, paths: [String], token: String, connections: Int, threads: Int, seconds: Double?)
        async throws -> Result
    {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        do {
            let result = try await drive(group: group, port: port, paths: paths, token: token, connections: connections, seconds: seconds)
            try await group.shutdownGracefully()
            return result
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private static func drive(group: MultiThreadedEventLoopGroup, port: Int, paths: [String], token: String, connections: Int, seconds: Double?)
        async throws -> Result
    {
        var headers = HTTPHeaders()
        headers.add(name: "host", value: "127.0.0.1:\(port)")
        headers.add(name: "authorization", value: "Bearer \(token)")
        headers.add(name: "accept", value: "application/json")
        let n = max(1, min(connections, paths.count))
        let start = NIODeadline.now()
        let deadline = seconds.map { start + .milliseconds(Int64($0 * 1000)) }
        var futures: [EventLoopFuture<(Int, Int)>] = []
        for c in 0..<n {
            let slice: [String]
            if deadline == nil {
                slice = stride(from: c, to: paths.count, by: n).map { paths[$0] }
            } else {
                let offset = c * paths.count / n
                slice = Array(paths[offset...] + paths[..<offset])
            }
            let loop = group.next()
            let promise = loop.makePromise(of: (Int, Int).self)
            let headersCopy = headers
            let channel = ClientBootstrap(group: loop)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(
                            LoadHandler(paths: slice, headers: headersCopy, deadline: deadline, promise: promise))
                    }
                }
                .connect(host: "127.0.0.1", port: port)
            channel.whenFailure { promise.fail($0) }
            futures.append(promise.futureResult)
        }
        var requests = 0, errors = 0
        for f in futures {
            let (r, e) = try await f.get()
            requests += r
            errors += e
        }
        let elapsed = Double((NIODeadline.now() - start).nanoseconds) / 1e9
        return Result(requests: requests, errors: errors, seconds: elapsed)
    }
}

private final class LoadHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let paths: [String]
    private let headers: HTTPHeaders
    private let deadline: NIODeadline?
    private let promise: EventLoopPromise<(Int, Int)>
    private var next = 0
    private var done = 0
    private var errors = 0
    private var completed = false

    init(paths: [String], headers: HTTPHeaders, deadline: NIODeadline?, promise: EventLoopPromise<(Int, Int)>) {
        self.paths = paths
        self.headers = headers
        self.deadline = deadline
        self.promise = promise
    }

    func channelActive(context: ChannelHandlerContext) {
        send(context: context)
    }

    private func send(context: ChannelHandlerContext) {
        let finished = deadline.map { NIODeadline.now() >= $0 } ?? (next >= paths.count)
        if finished || paths.isEmpty {
            complete(.success((done, errors)))
            context.close(promise: nil)
            return
        }
        let path = paths[next % paths.count]
        next += 1
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            if h.status != .ok { errors += 1 }
        case .body:
            break
        case .end:
            done += 1
            send(context: context)
        }
    }

    private func complete(_ result: Swift.Result<(Int, Int), any Error>) {
        guard !completed else { return }
        completed = true
        promise.completeWith(result)
    }

    func channelInactive(context: ChannelHandlerContext) {
        complete(.success((done, errors)))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        complete(.failure(error))
        context.close(promise: nil)
    }
}
