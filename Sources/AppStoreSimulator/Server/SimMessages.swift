import AppStoreModels
import Foundation
import NIOCore

/// A request as the HTTP layer hands it over.
public struct SimRequest: Sendable {
    public var method: String
    /// The path without the query.
    public var path: String
    public var query: [(String, String)]
    public var authorization: String?
    public var body: [UInt8]
    /// Which port (Apple host) received it.
    public var environment: SimEnvironment

    public init(method: String, path: String, query: [(String, String)], authorization: String?, body: [UInt8],
                environment: SimEnvironment) {
        self.method = method
        self.path = path
        self.query = query
        self.authorization = authorization
        self.body = body
        self.environment = environment
    }

    /// Splits `/a/b?x=1&y=2` into path and percent-decoded query items.
    public static func split(uri: String) -> (String, [(String, String)]) {
        guard let q = uri.firstIndex(of: "?") else { return (uri, []) }
        let items = uri[uri.index(after: q)...].split(separator: "&").map { pair -> (String, String) in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func dec(_ s: Substring) -> String {
                String(s).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s)
            }
            return (dec(kv[0]), kv.count > 1 ? dec(kv[1]) : "")
        }
        return (String(uri[..<q]), items)
    }
}

/// What the HTTP layer should do.
public struct SimResponse: Sendable {
    public enum Disposition: Sendable, Equatable {
        case respond
        /// Close the connection without answering.
        case drop
        /// Never answer; close after the given milliseconds.
        case hang(Int)
    }

    public var status: Int
    public var headers: [(String, String)]
    public var body: [ByteBuffer]
    public var disposition: Disposition = .respond
    /// Wait this long before answering.
    public var delayMs = 0
    /// When set, the answer is this one's result instead (the HTTP layer awaits it off the
    /// event loop): `POST /_sim/clock` waits for the cancel page's views the clock passed.
    public var deferred: (@Sendable () async -> SimResponse)?

    public init(status: Int, headers: [(String, String)] = [], body: [ByteBuffer] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    static func json(_ status: Int, _ bytes: [UInt8]) -> SimResponse {
        SimResponse(status: status, headers: [("content-type", "application/json")], body: [ByteBuffer(bytes: bytes)])
    }

    static func json(_ status: Int, _ value: some Encodable) -> SimResponse {
        json(status, (try? SigningChain.encode(value)) ?? Array("{}".utf8))
    }

    /// A 400 of the `/_sim` endpoints: `{"error": message}`.
    static func badRequest(_ message: String) -> SimResponse {
        var w = JSONWriter()
        w.beginObject()
        w.string("error", message)
        w.endObject()
        return .json(400, w.bytes)
    }

    static func error(_ e: AppleError) -> SimResponse {
        json(e.httpStatus, ErrorPayload(errorCode: e.code, errorMessage: e.message))
    }
}
