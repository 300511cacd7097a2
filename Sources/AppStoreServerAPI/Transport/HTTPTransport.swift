import Foundation

/// An HTTP request as the client builds it.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: URL
    /// Header fields in order; names as sent.
    public var headers: [(name: String, value: String)]
    public var body: Data?
    /// Seconds before the request is abandoned as a timeout.
    public var timeout: TimeInterval

    public init(method: String, url: URL, headers: [(name: String, value: String)] = [], body: Data? = nil, timeout: TimeInterval) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }

    /// The value of the first header named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// An HTTP response: status, header fields (names lowercased) and the whole body.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header fields keyed by lowercased name.
    public var headers: [String: String]
    public var body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { a, _ in a })
        self.body = body
    }

    /// Header names already lowercased (first value of each), as transports collect them.
    public init(lowercasedHeaders headers: [String: String], status: Int, body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why a request got no HTTP response. `timeout` and `connection` are retryable;
/// `untrustedServer` is not: the same server will present the same certificate.
public enum HTTPTransportError: Error, Hashable, Sendable {
    /// The request took longer than its timeout.
    case timeout
    /// DNS, TCP, a TLS failure other than trust, or a connection closed early; the text is for logs.
    case connection(String)
    /// TLS: the server's certificate does not chain to a trusted root, or does not name the
    /// host. The text says which, and for which host.
    case untrustedServer(String)
}

/// Sends one HTTP request and returns the whole response. Implementations must be safe to call
/// from many tasks at once. Throw ``HTTPTransportError`` when there is no response, and
/// `CancellationError` when the task is cancelled.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}
