import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for the simulator's outgoing requests (the cancel page's
/// real-time requests, performance tests): keep-alive, Content-Length bodies, one thread per
/// connection, answers from a handler, every request kept.
final class LoopbackReceiver: @unchecked Sendable {
    struct Request: Sendable {
        var method: String
        var target: String
        var body: Data
    }

    struct Response: Sendable {
        var status: Int
        var body: Data = Data()

        static func json(_ text: String) -> Response { Response(status: 200, body: Data(text.utf8)) }
    }

    let port: UInt16
    private let listener: Int32
    private let handler: @Sendable (Request) -> Response
    private let state = Mutex<(received: [Request], open: Set<Int32>, stopped: Bool)>(([], [], false))

    init(handler: @escaping @Sendable (Request) -> Response) throws {
        self.handler = handler
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
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 128) == 0 else {
            close(listener)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in acceptLoop() }.start()
    }

    var url: String { "http://127.0.0.1:\(port)/apple/retention-message" }
    var requests: [Request] { state.withLock { $0.received } }

    /// Stops accepting and ends every open connection.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        state.withLock { s in
            s.stopped = true
            for fd in s.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let accepted = state.withLock { s -> Bool in
                guard !s.stopped else { return false }
                s.open.insert(client)
                return true
            }
            guard accepted else {
                close(client)
                return
            }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ fd: Int32) {
        defer {
            state.withLock { _ = $0.open.remove(fd) }
            close(fd)
        }
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var headerEnd: Range<Data.Index>?
            while headerEnd == nil {
                headerEnd = buffer.range(of: Data("\r\n\r\n".utf8))
                if headerEnd != nil { break }
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { return }
                buffer.append(contentsOf: chunk[0..<n])
            }
            guard let end = headerEnd else { return }
            let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let requestLine = lines.removeFirst().split(separator: " ")
            guard requestLine.count >= 2 else { return }
            let lengthLine = lines.first { $0.lowercased().hasPrefix("content-length:") }
            let length = Int(lengthLine?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "0") ?? 0
            buffer.removeSubrange(..<end.upperBound)
            while buffer.count < length {
                let n = recv(fd, &chunk, chunk.count, 0)
                if n <= 0 { return }
                buffer.append(contentsOf: chunk[0..<n])
            }
            let request = Request(method: String(requestLine[0]), target: String(requestLine[1]), body: Data(buffer.prefix(length)))
            buffer.removeSubrange(..<(buffer.startIndex + length))
            state.withLock { $0.received.append(request) }
            let response = handler(request)
            var bytes = Data("HTTP/1.1 \(response.status) X\r\nContent-Length: \(response.body.count)\r\nContent-Type: application/json\r\n\r\n".utf8)
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
