import Foundation

/// URLs with their query escaped, and failures in words for logs and item outcomes.
extension AppStoreServerAPIClient {
    static func url(_ base: URL, path: String, query: [(name: String, value: String)]) -> URL {
        var text = base.absoluteString.trimmingSuffix("/") + path
        if !query.isEmpty {
            text += "?" + query.map { "\(escape($0.name))=\(escape($0.value))" }.joined(separator: "&")
        }
        return URL(string: text)!
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c): "invalid JSON at \(path(c.codingPath)): \(c.debugDescription)"
        case DecodingError.keyNotFound(let k, let c): "missing \(path(c.codingPath + [k]))"
        case DecodingError.typeMismatch(_, let c): "wrong type at \(path(c.codingPath))"
        case DecodingError.valueNotFound(_, let c): "null at \(path(c.codingPath))"
        case HTTPTransportError.connection(let m): m
        case HTTPTransportError.timeout: "timeout"
        case HTTPTransportError.untrustedServer(let m): m
        default: String(describing: error)
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "top level" : keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
}
