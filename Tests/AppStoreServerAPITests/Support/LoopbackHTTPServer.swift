import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny HTTP/1.1 server on a loopback address for tests: keep-alive, Content-Length bodies,
/// one thread per connection, answers from a handler.
///
/// Each server listens on an address of its own in 127.0.0.0/8 (127.1.0.1, 127.1.0.2, ...): the
/// shared transport pools connections by host and port, and a server given a port another one
/// used a moment before would otherwise meet that server's pooled connections, closed by its
/// `stop()` but not yet noticed by the pool (a request sent on one fails at once).
final class LoopbackHTTPServer: @unchecked Sendable {
    private static let nextHost = Mutex(0)

    /// A loopback address no other server of this process has had.
    static func freshHost() -> String {
        let n = nextHost.withLock { n in
            n += 1
            return n
        }
        return "127.1.\(n / 250 % 250).\(n % 250 + 1)"
    }

    struct Request: Sendable {
        var method: String
        var target: String
        var headers: [String: String]
        var body: Data
    }
    struct Response: Sendable {
        var status: Int
        var headers: [String: String] = [:]
        var body: Data = Data()
    }

    let host: String
    let port: UInt16
    private let listener: Int32
    private let handler: @Sendable (Request) -> Response
    private let hang: Bool
    private let lock = NSLock()
    private var received: [Request] = []
    /// Signalled once per request recorded.
    private let arrived = DispatchSemaphore(value: 0)
    private var connections = 0
    /// Accepted sockets still being served; `stop()` shuts them down.
    private var open: Set<Int32> = []
    private var stopped = false

    /// - Parameters:
    ///   - host, port: where to listen (a stopped server's, to start another in its place); by
    ///     default a fresh loopback address and a free port.
    ///   - hang: read requests but never answer (for timeout tests).
    init(host: String? = nil, port requested: UInt16 = 0, hang: Bool = false,
         handler: @escaping @Sendable (Request) -> Response) throws {
        let host = host ?? Self.freshHost()
        self.host = host
        self.handler = handler
        self.hang = hang
        #if canImport(Glibc)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let listener = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard listener >= 0 else { throw POSIXError(.EIO) }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = requested.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 64) == 0 else { close(listener); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    var baseURL: URL { URL(string: "http://\(host):\(port)")! }

    /// Waits, on a thread of its own (never a cooperative one), until a request is recorded;
    /// false if none came within `timeout`.
    func waitForRequest(timeout: TimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { [arrived] in continuation.resume(returning: arrived.wait(timeout: .now() + timeout) == .success) }
        }
    }
    var requests: [Request] { lock.withLock { received } }
    var connectionCount: Int { lock.withLock { connections } }

    /// Stops accepting and ends every connection still open. A stopped server must not go on
    /// answering over a kept-alive connection: the shared transport pools connections by host and
    /// port, and a later server at the same address would otherwise see its requests answered by
    /// this one's handler.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        lock.withLock {
            stopped = true
            for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let accepted = lock.withLock { () -> Bool in
                if stopped { return false }
                connections += 1
                open.insert(client)
                return true
            }
            guard accepted else { close(client); return }
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer {
            // Forget the descriptor before closing it, so stop() never shuts down a reused number.
            lock.withLock { _ = open.remove(fd) }
            close(fd)
        }
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            // Read until the end of the header block.
            let headerEnd: Range<Data.Index>
            while true {
                if let end = buffer.range(of: Data("\r\n\r\n".utf8)) {
                    headerEnd = end
                    break
                }
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { return }
                buffer.append(contentsOf: chunk[0..<n])
            }
            let head = String(decoding: buffer[..<headerEnd.lowerBound], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.removeFirst().split(separator: " ")
            guard requestLine.count >= 2 else { return }
            var headers: [String: String] = [:]
            for line in lines {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let length = Int(headers["content-length"] ?? "0") ?? 0
            buffer.removeSubrange(..<headerEnd.upperBound)
            while buffer.count < length {
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { return }
                buffer.append(contentsOf: chunk[0..<n])
            }
            let body = buffer.prefix(length)
            buffer.removeSubrange(..<(buffer.startIndex + length))
            let request = Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: Data(body))
            lock.withLock { received.append(request) }
            arrived.signal()
            if hang {
                // Keep the connection open without answering until the client gives up.
                while recv(fd, &chunk, chunk.count, 0) > 0 {}
                return
            }
            let response = handler(request)
            var text = "HTTP/1.1 \(response.status) X\r\nContent-Length: \(response.body.count)\r\nConnection: keep-alive\r\n"
            for (name, value) in response.headers { text += "\(name): \(value)\r\n" }
            text += "\r\n"
            var bytes = Data(text.utf8)
            bytes.append(response.body)
            let sent = bytes.withUnsafeBytes { raw -> Bool in
                var offset = 0
                while offset < raw.count {
                    #if canImport(Glibc)
                    let n = send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    #else
                    let n = send(fd, raw.baseAddress! + offset, raw.count - offset, 0)
                    #endif
                    if n <= 0 { return false }
                    offset += n
                }
                return true
            }
            if !sent { return }
        }
    }
}
