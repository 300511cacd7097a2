import AppStoreModels
import Foundation

/// The Retention Messaging API's management calls (docs/apple-api.md, "Retention Messaging"):
/// images, messages, default messages, the realtime URL and the performance test, under
/// `/inApps/v1/messaging/`, with the same key, limiter and retries as every other call.
extension AppStoreServerAPIClient {
    /// One management call; the answer's body when it is a 2xx.
    func messaging(_ method: String, _ path: String, body: Data? = nil, contentType: String = "application/json",
                   environment: AppStoreEnvironment? = nil) async -> AppStoreOutcome<Data> {
        let env = environment ?? configuration.environment
        let url = Self.url(configuration.baseURL(for: env), path: "/inApps/v1/messaging/" + path, query: [])
        let response = await perform(RateLimitKey(.messaging, env), authorized: true) { token in
            var headers: [(name: String, value: String)] = [("Accept", "application/json"), ("User-Agent", Self.userAgent)]
            if body != nil { headers.append(("Content-Type", contentType)) }
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            return HTTPRequest(method: method, url: url, headers: headers, body: body ?? Data(), timeout: configuration.requestTimeout)
        } judge: { Self.judgeServerAPI($0) }
        guard case .success(let http) = response else { return response.failure() }
        return .success(http.body)
    }

    func messaging<T: Decodable>(_ method: String, _ path: String, json: (some Encodable)?, as type: T.Type,
                                 environment: AppStoreEnvironment? = nil) async -> AppStoreOutcome<T> {
        var body: Data?
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            guard let data = try? encoder.encode(json) else { return .malformedResponse("cannot encode the \(path) request") }
            body = data
        }
        switch await messaging(method, path, body: body, environment: environment) {
        case .success(let data):
            if T.self == Empty.self { return .success(Empty() as! T) }
            do { return .success(try JSONDecoder().decode(T.self, from: data)) } catch {
                return .malformedResponse("\(path) response: \(Self.describe(error))")
            }
        case let other: return other.failure()
        }
    }

    /// No body expected.
    public struct Empty: Codable, Sendable {}

    public func uploadImage(_ id: String, png: Data) async -> AppStoreOutcome<Empty> {
        switch await messaging("PUT", "image/\(Self.escape(id))", body: png, contentType: "image/png") {
        case .success: return .success(Empty())
        case let other: return other.failure()
        }
    }

    public func deleteImage(_ id: String) async -> AppStoreOutcome<Empty> {
        await messaging("DELETE", "image/\(Self.escape(id))", json: Empty?.none, as: Empty.self)
    }

    public func imageList() async -> AppStoreOutcome<RetentionImageList> {
        await messaging("GET", "image/list", json: Empty?.none, as: RetentionImageList.self)
    }

    public func uploadMessage(_ id: String, _ message: UploadMessageRequestBody) async -> AppStoreOutcome<Empty> {
        await messaging("PUT", "message/\(Self.escape(id))", json: message, as: Empty.self)
    }

    public func deleteMessage(_ id: String) async -> AppStoreOutcome<Empty> {
        await messaging("DELETE", "message/\(Self.escape(id))", json: Empty?.none, as: Empty.self)
    }

    public func messageList() async -> AppStoreOutcome<RetentionMessageList> {
        await messaging("GET", "message/list", json: Empty?.none, as: RetentionMessageList.self)
    }

    public func setDefaultMessage(productId: String, locale: String, messageId: String) async -> AppStoreOutcome<Empty> {
        await messaging("PUT", "default/\(Self.escape(productId))/\(Self.escape(locale))",
                        json: DefaultConfiguration(messageIdentifier: messageId), as: Empty.self)
    }

    public func defaultMessage(productId: String, locale: String) async -> AppStoreOutcome<DefaultConfiguration> {
        await messaging("GET", "default/\(Self.escape(productId))/\(Self.escape(locale))", json: Empty?.none, as: DefaultConfiguration.self)
    }

    public func deleteDefaultMessage(productId: String, locale: String) async -> AppStoreOutcome<Empty> {
        await messaging("DELETE", "default/\(Self.escape(productId))/\(Self.escape(locale))", json: Empty?.none, as: Empty.self)
    }

    /// The realtime URL of `environment` (Apple keeps one per environment).
    public func setRealtimeURL(_ url: String, environment: AppStoreEnvironment) async -> AppStoreOutcome<Empty> {
        await messaging("PUT", "realtime/url", json: RealtimeURLBody(realtimeURL: url), as: Empty.self, environment: environment)
    }

    public func realtimeURL(environment: AppStoreEnvironment) async -> AppStoreOutcome<RealtimeURLBody> {
        await messaging("GET", "realtime/url", json: Empty?.none, as: RealtimeURLBody.self, environment: environment)
    }

    public func deleteRealtimeURL(environment: AppStoreEnvironment) async -> AppStoreOutcome<Empty> {
        await messaging("DELETE", "realtime/url", json: Empty?.none, as: Empty.self, environment: environment)
    }

    /// Starts Apple's performance test of the Sandbox realtime URL with a Sandbox purchase.
    public func startPerformanceTest(originalTransactionId: String) async -> AppStoreOutcome<PerformanceTestStarted> {
        await messaging("POST", "performanceTest", json: ["originalTransactionId": originalTransactionId],
                        as: PerformanceTestStarted.self, environment: .sandbox)
    }

    public func performanceTestResult(requestId: String) async -> AppStoreOutcome<PerformanceTestResult> {
        await messaging("GET", "performanceTest/result/\(Self.escape(requestId))", json: Empty?.none,
                        as: PerformanceTestResult.self, environment: .sandbox)
    }
}
