import Foundation

/// A bare HTTP/1.1 client on a POSIX socket, for what a polite client cannot do: a body that
/// never ends, headers sent by halves, a body far over the limit, many idle connections.
final class RawHTTP: @unchecked Sendable {
    let fd: Int32

    /// Connects to 127.0.0.1:`port`; reads give up after `timeout` seconds.
    init(port: Int, timeout: TimeInterval = 15) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLITestError("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw CLITestError("connect to port \(port) failed (errno \(errno))")
        }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Sends bytes; false when the server already closed (no SIGPIPE).
    @discardableResult
    func send(_ text: String) -> Bool { send(Data(text.utf8)) }

    @discardableResult
    func send(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = Foundation.send(fd, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if n <= 0 { return false }
                sent += n
            }
            return true
        }
    }

    /// Everything the server sends until it closes (or the read timeout): "" when it closed
    /// without a word; nil when the read timed out with nothing.
    func readToClose() -> String? {
        var out = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { out.append(contentsOf: buffer[0..<n]); continue }
            if n == 0 || out.count > 0 { break }
            return errno == EAGAIN || errno == EWOULDBLOCK ? nil : ""
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The status code of an answer read by ``readToClose()``.
    static func status(_ answer: String?) -> Int? {
        guard let answer, answer.hasPrefix("HTTP/1.1 ") else { return nil }
        return Int(answer.dropFirst(9).prefix(3))
    }

    /// One request on a connection of its own (Connection: close): status and body.
    static func exchange(port: Int, method: String, path: String, body: String = "") throws -> (status: Int?, body: String) {
        let c = try RawHTTP(port: port)
        c.send("\(method) \(path) HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        let answer = c.readToClose() ?? ""
        let parts = answer.components(separatedBy: "\r\n\r\n")
        return (status(answer), parts.dropFirst().joined(separator: "\r\n\r\n"))
    }
}
