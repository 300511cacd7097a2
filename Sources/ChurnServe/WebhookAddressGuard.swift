import ChurnModel
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Refuses a receiver whose name resolves to a loopback, private, link-local or other
/// non-public address (``NetworkAddress``), checked before each request because a name can
/// change; an answer is reused for 5 seconds. The HTTP client resolves the name again when it
/// connects: a name re-pointed within those milliseconds (DNS rebinding) is not caught here.
public final class WebhookAddressGuard: Sendable {
    private let cache = Mutex<[String: (at: ContinuousClock.Instant, refusal: String?)]>([:])
    private let queue = DispatchQueue(label: "churnwatch.webhooks.resolve", attributes: .concurrent)

    public init() {}

    /// Why `url` may not be reached, or nil.
    public func refusal(_ url: String) async -> String? {
        guard let host = URLComponents(string: url)?.host, !host.isEmpty else { return "the endpoint's URL has no host" }
        let now = ContinuousClock.now
        if let hit = cache.withLock({ $0[host] }), now - hit.at < .seconds(5) { return hit.refusal }
        let refusal = await withCheckedContinuation { (c: CheckedContinuation<String?, Never>) in
            queue.async { c.resume(returning: Self.check(host)) }
        }
        cache.withLock { table in
            if table.count > 1_000 { table.removeAll() }
            table[host] = (now, refusal)
        }
        return refusal
    }

    static func check(_ host: String) -> String? {
        let name = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let addresses = resolve(name)
        guard !addresses.isEmpty else { return "the receiver's name \(name.prefix(100)) does not resolve" }
        for bytes in addresses {
            if let range = NetworkAddress.privateRange(bytes) {
                return "refused: \(name.prefix(100)) resolves to a \(range) address (\(text(bytes))); an endpoint on a private network needs --allow-private"
            }
        }
        return nil
    }

    static func resolve(_ name: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var out: [[UInt8]] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let n = node {
            if let addr = n.pointee.ai_addr {
                if n.pointee.ai_family == AF_INET {
                    addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                        out.append(withUnsafeBytes(of: sin.pointee.sin_addr) { Array($0) })
                    }
                } else if n.pointee.ai_family == AF_INET6 {
                    addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                        out.append(withUnsafeBytes(of: sin6.pointee.sin6_addr) { Array($0) })
                    }
                }
            }
            node = n.pointee.ai_next
        }
        return out
    }

    static func text(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: bytes.count, by: 2).map { String(format: "%x", Int(bytes[$0]) << 8 | Int(bytes[$0 + 1])) }.joined(separator: ":")
    }
}
