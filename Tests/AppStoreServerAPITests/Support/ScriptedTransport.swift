import AppStoreServerAPI
import Foundation

/// An ``HTTPTransport`` that answers from a handler and records every request with the time it
/// was sent.
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    typealias Handler = @Sendable (HTTPRequest, Int) throws -> HTTPResponse
    private let lock = NSLock()
    private var sent: [(request: HTTPRequest, at: Date)] = []
    private let handler: Handler
    private let clock: TestClock?

    /// `handler` gets the request and its 0-based index.
    init(clock: TestClock? = nil, _ handler: @escaping Handler) {
        self.clock = clock
        self.handler = handler
    }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let index = lock.withLock {
            sent.append((request, clock?.now() ?? Date()))
            return sent.count - 1
        }
        return try handler(request, index)
    }

    var requests: [HTTPRequest] { lock.withLock { sent.map(\.request) } }
    var sendTimes: [Date] { lock.withLock { sent.map(\.at) } }

    static func json(_ status: Int, _ body: some Encodable, headers: [String: String] = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: try! JSONEncoder().encode(body))
    }

    static func error(_ status: Int, _ code: Int64, headers: [String: String] = [:]) -> HTTPResponse {
        json(status, ErrorPayload(errorCode: code, errorMessage: "test"), headers: headers)
    }
}

extension HTTPRequest {
    /// Query items in order, as (name, value), percent-decoded.
    var queryItems: [(String, String)] {
        (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }
    }
}
