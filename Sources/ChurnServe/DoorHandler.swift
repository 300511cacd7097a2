import NIOCore
import NIOHTTP1

/// One connection's requests, read whole within the limits, answered in order: a request that
/// is too big is a 413, one too slow a 408 (then the connection closes); a connection that sends
/// nothing in time is closed. Lives on its channel's event loop.
final class DoorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let limits: DoorLimits
    private let counters: DoorCounters
    private let route: ServeRoute
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    /// After a 413: the rest of the request is not read into memory.
    private var refusing = false
    private var timer: Scheduled<Void>?

    init(limits: DoorLimits, counters: DoorCounters, route: @escaping ServeRoute) {
        (self.limits, self.counters, self.route) = (limits, counters, route)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        arm(context, limits.headerTimeout)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = nil
            refusing = false
            arm(context, limits.bodyTimeout)
            if let length = h.headers.first(name: "content-length").flatMap(Int.init), length > limits.maxBody {
                refuse(context, .text(413, "the body is over \(limits.maxBody) bytes (Apple's notifications are a few KB)"))
            }
        case .body(var part):
            guard !refusing else { return }
            if body == nil { body = part } else { body!.writeBuffer(&part) }
            if (body?.readableBytes ?? 0) > limits.maxBody {
                refuse(context, .text(413, "the body is over \(limits.maxBody) bytes (Apple's notifications are a few KB)"))
            }
        case .end:
            guard !refusing, let head else { return }
            timer?.cancel()
            timer = nil
            let request = ServeRequest(method: head.method.rawValue, path: String(head.uri.split(separator: "?", maxSplits: 1).first ?? ""),
                                       body: body.map { Array($0.readableBytesView) } ?? [])
            self.head = nil
            body = nil
            counters.inFlight.add(1, ordering: .relaxed)
            let promise = context.eventLoop.makePromise(of: ServeResponse.self)
            let route = self.route
            promise.completeWithTask { await route(request) }
            let keepAlive = head.isKeepAlive
            let version = head.version
            promise.futureResult.assumeIsolated().whenSuccess { response in
                self.counters.inFlight.subtract(1, ordering: .relaxed)
                self.write(context, response, version: version, keepAlive: keepAlive)
            }
        }
    }

    /// Answers and closes: what is still coming of this request is dropped.
    private func refuse(_ context: ChannelHandlerContext, _ response: ServeResponse) {
        refusing = true
        timer?.cancel()
        timer = nil
        write(context, response, version: head?.version ?? .http1_1, keepAlive: false)
        head = nil
        body = nil
    }

    private func write(_ context: ChannelHandlerContext, _ response: ServeResponse, version: HTTPVersion, keepAlive: Bool) {
        guard context.channel.isActive else { return }
        let open = keepAlive && !counters.draining.load(ordering: .relaxed)
        var headers = HTTPHeaders([("content-type", response.contentType), ("content-length", String(response.body.utf8.count))])
        if !open { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: response.status),
                                                             headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: response.body)))), promise: nil)
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if open {
            arm(context, limits.headerTimeout)
        } else {
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// The connection's deadline from now: past it, a request begun gets a 408 and the
    /// connection closes; an idle one just closes.
    private func arm(_ context: ChannelHandlerContext, _ after: Duration) {
        timer?.cancel()
        let nanoseconds = Int64(after.components.seconds) * 1_000_000_000 + after.components.attoseconds / 1_000_000_000
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) {
            self.timer = nil
            if self.head != nil, !self.refusing {
                self.refuse(context, .text(408, "the request took too long to arrive"))
            } else {
                context.close(promise: nil)
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
