@testable import AppStoreServerAPI
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The request timeout bounds the whole exchange, body included: a server that answers its
/// head at once and then dribbles the body cannot hold a call past the timeout.
///
/// A wall-clock test: `ops/test` runs the suites named `*WallClockTests` in a test process of
/// their own after the others, because beside the whole suite on 2 cores the cooperative pool is
/// starved for tens of seconds (80 s measured under load) and a timeout cannot fire on time.
@Suite("NIO transport: the timeout covers a slow body")
struct SlowBodyWallClockTests {
    @Test func aDribbledBodyTimesOutWithinTheTimeout() async throws {
        // 1200 bytes of a promised 1300, one every 100 ms: the server would hold the call 120 s.
        let dribble: TimeInterval = 120
        let server = try DribblingServer(bytes: 1200, every: 0.1, promised: 1300)
        defer { server.stop() }
        let timeout: TimeInterval = 2
        let request = HTTPRequest(method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)/inApps/v1/subscriptions/1")!, timeout: timeout)
        let started = Date()
        var thrown: (any Error)?
        do {
            _ = try await NIOHTTPTransport.shared.send(request)
        } catch {
            thrown = error
        }
        let elapsed = Date().timeIntervalSince(started)
        print("dribbled body: \(String(describing: thrown)) after \(String(format: "%.2f", elapsed)) s against a \(timeout) s timeout")
        #expect(thrown as? HTTPTransportError == .timeout, "\(String(describing: thrown))")
        #expect(elapsed >= timeout * 0.95, "the call ended after \(elapsed) s, before its timeout")
        // 2.0 to 2.5 s measured alone; the bound that matters is that the call ended long before
        // the dribble would have.
        #expect(elapsed < dribble / 4, "the call took \(elapsed) s against a \(timeout) s timeout")
        // The client hung up while the server was still sending (it notices at its next write).
        #expect(try await server.waitUntilCutOff(timeout: 10), "the server sent its whole body: the call was not cut off")
    }
}

/// One connection at a time: reads a request head, sends a response head promising `promised`
/// bytes, then `bytes` of them one at a time `every` seconds, and closes. Bounded: it stops by
/// itself.
private final class DribblingServer: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    /// Signalled when a client closed its connection before the whole dribble was sent.
    private let cutOff = DispatchSemaphore(value: 0)

    init(bytes: Int, every: TimeInterval, promised: Int) throws {
        #if canImport(Glibc)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let listener = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard listener >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 8) == 0 else { close(listener); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: address.sin_port)
        Thread {
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 { return }
                let cutOff = self.cutOff
                Thread {
                    if !Self.dribble(fd, bytes: bytes, every: every, promised: promised) { cutOff.signal() }
                }.start()
            }
        }.start()
    }

    /// True once a client hung up mid-body (waits on a thread of its own, at most `timeout`).
    func waitUntilCutOff(timeout: TimeInterval) async throws -> Bool {
        let cutOff = self.cutOff
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: cutOff.wait(timeout: .now() + timeout) == .success) }
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Returns false when the client hung up before all `bytes` were sent.
    private static func dribble(_ fd: Int32, bytes: Int, every: TimeInterval, promised: Int) -> Bool {
        defer { close(fd) }
        var received = Data()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while received.range(of: Data("\r\n\r\n".utf8)) == nil {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n <= 0 { return false }
            received.append(contentsOf: chunk[0..<n])
        }
        guard write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(promised)\r\n\r\n") else { return false }
        for _ in 0..<bytes {
            // Pacing the dribble, not waiting for anything.
            usleep(UInt32(every * 1_000_000))
            guard write(fd, " ") else { return false }
        }
        return true
    }

    private static func write(_ fd: Int32, _ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { raw in
            #if canImport(Glibc)
            send(fd, raw.baseAddress!, raw.count, Int32(MSG_NOSIGNAL)) == raw.count
            #else
            send(fd, raw.baseAddress!, raw.count, 0) == raw.count
            #endif
        }
    }
}
