import Foundation
import Synchronization

/// One request as the door read it: whole, within its limits.
public struct ServeRequest: Sendable {
    public var method: String
    /// The path without its query.
    public var path: String
    public var body: [UInt8]

    public init(method: String, path: String, body: [UInt8]) {
        self.method = method
        self.path = path
        self.body = body
    }
}

/// One answer: a status and a short text (or JSON) body.
public struct ServeResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: String

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    /// A one-line text answer (a newline added).
    public static func text(_ status: Int, _ line: String) -> ServeResponse {
        ServeResponse(status: status, body: line + "\n")
    }
}

/// The door's limits: what a public endpoint must bound so that no client can hold it.
public struct DoorLimits: Sendable {
    /// The largest request body read (Apple's notifications are a few KB); more is a 413.
    public var maxBody = 64 * 1024
    /// How long a connection may take to send a request's headers, counted from its opening or
    /// from the previous answer (an idle keep-alive connection is closed then too).
    public var headerTimeout: Duration = .seconds(10)
    /// How long a request's body may take after its headers; a slower one gets a 408.
    public var bodyTimeout: Duration = .seconds(10)
    /// Connections open at once; one more is closed as soon as it is accepted.
    public var maxConnections = 512

    public init() {}
}

/// A request handler's answer, computed off the event loop.
public typealias ServeRoute = @Sendable (ServeRequest) async -> ServeResponse

/// Runs `work`, or gives up after `budget` with nil: an answer is owed even when the database
/// hangs. The work is not awaited past the budget (it ends on its own, its result dropped).
func within<T: Sendable>(_ budget: Duration, _ work: @escaping @Sendable () async throws -> T) async -> Result<T, any Error>? {
    let once = Mutex(false)
    return await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>?, Never>) in
        let finish: @Sendable (Result<T, any Error>?) -> Void = { result in
            let first = once.withLock { done in
                defer { done = true }
                return !done
            }
            if first { continuation.resume(returning: result) }
        }
        let timer = Task {
            // Cancelled: the work finished first.
            guard (try? await Task.sleep(for: budget)) != nil else { return }
            finish(nil)
        }
        Task {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            timer.cancel()
            finish(result)
        }
    }
}
