import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``HTTPTransport`` over one shared `URLSession`: HTTP keep-alive, up to
/// `maximumConnectionsPerHost` parallel connections per host, no cache, no cookies.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// - Parameter maximumConnectionsPerHost: parallel connections per host; the worker runs
    ///   about 64 requests at once.
    public init(maximumConnectionsPerHost: Int = 64) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maximumConnectionsPerHost
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.timeoutIntervalForResource = 300
        session = URLSession(configuration: configuration)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: request.timeout)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.addValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body

        let box = TaskBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        continuation.resume(throwing: Self.map(error))
                        return
                    }
                    guard let http = response as? HTTPURLResponse else {
                        continuation.resume(throwing: HTTPTransportError.connection("not an HTTP response"))
                        return
                    }
                    var headers: [String: String] = [:]
                    for (name, value) in http.allHeaderFields {
                        if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                    }
                    continuation.resume(returning: HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data()))
                }
                box.set(task)
                task.resume()
            }
        } onCancel: {
            box.cancel()
        }
    }

    private static func map(_ error: any Error) -> any Error {
        let ns = error as NSError
        switch ns.code {
        case URLError.Code.timedOut.rawValue: return HTTPTransportError.timeout
        case URLError.Code.cancelled.rawValue: return CancellationError()
        default: return HTTPTransportError.connection("\(ns.domain) \(ns.code): \(ns.localizedDescription)")
        }
    }

    /// Holds the task so cancellation that races with its creation still cancels it.
    private final class TaskBox: @unchecked Sendable {
        private let lock = NSLock()
        private var task: URLSessionDataTask?
        private var cancelled = false

        func set(_ task: URLSessionDataTask) {
            lock.lock()
            self.task = task
            let cancel = cancelled
            lock.unlock()
            if cancel { task.cancel() }
        }

        func cancel() {
            lock.lock()
            cancelled = true
            let task = self.task
            lock.unlock()
            task?.cancel()
        }
    }
}
