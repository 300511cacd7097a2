/// The Retention Messaging API's management bodies (developer → Apple), with Apple's names.
/// Apple's limits are `RetentionMessageLimits`.

/// `PUT /inApps/v1/messaging/message/{messageIdentifier}`.
public struct UploadMessageRequestBody: Codable, Hashable, Sendable {
    public struct Image: Codable, Hashable, Sendable {
        public var imageIdentifier: String
        public var altText: String
        public init(imageIdentifier: String, altText: String) { (self.imageIdentifier, self.altText) = (imageIdentifier, altText) }
    }

    public struct BulletPoint: Codable, Hashable, Sendable {
        public var text: String
        public var imageIdentifier: String
        public var altText: String
        public init(text: String, imageIdentifier: String, altText: String) {
            (self.text, self.imageIdentifier, self.altText) = (text, imageIdentifier, altText)
        }
    }

    public var header: String
    public var body: String
    public var image: Image?
    /// `ABOVE_BODY` or `ABOVE_IMAGE` (which needs an image).
    public var headerPosition: String?
    public var bulletPoints: [BulletPoint]?

    public init(header: String, body: String, image: Image? = nil, headerPosition: String? = nil, bulletPoints: [BulletPoint]? = nil) {
        (self.header, self.body, self.image, self.headerPosition, self.bulletPoints) = (header, body, image, headerPosition, bulletPoints)
    }
}

/// Apple's limits on a message, checked before it is sent.
public enum RetentionMessageLimits {
    public static let header = 66
    public static let body = 144
    public static let bulletPoints = 5
    public static let bulletPointText = 66
    public static let altText = 150
    public static let realtimeURL = 256
}

/// `GET image/list` and `GET message/list`: identifiers with their review state
/// (`PENDING`, `APPROVED`, `REJECTED`).
public struct RetentionImageList: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var imageIdentifier: String?
        public var imageState: String?
        public var imageSize: String?
    }
    public var imageIdentifiers: [Item]?
}

public struct RetentionMessageList: Codable, Hashable, Sendable {
    public struct Item: Codable, Hashable, Sendable {
        public var messageIdentifier: String?
        public var messageState: String?
        public init(messageIdentifier: String?, messageState: String?) { (self.messageIdentifier, self.messageState) = (messageIdentifier, messageState) }
    }
    public var messageIdentifiers: [Item]?
    public init(messageIdentifiers: [Item]?) { self.messageIdentifiers = messageIdentifiers }
}

/// `PUT|GET default/{productId}/{locale}`.
public struct DefaultConfiguration: Codable, Hashable, Sendable {
    public var messageIdentifier: String?
    public init(messageIdentifier: String?) { self.messageIdentifier = messageIdentifier }
}

/// `PUT|GET realtime/url`.
public struct RealtimeURLBody: Codable, Hashable, Sendable {
    public var realtimeURL: String?
    public init(realtimeURL: String?) { self.realtimeURL = realtimeURL }
}

/// `POST performanceTest` and `GET performanceTest/result/{requestId}`.
public struct PerformanceTestConfig: Codable, Hashable, Sendable {
    public var maxConcurrentRequests: Int?
    public var totalRequests: Int?
    /// Milliseconds.
    public var totalDuration: Int?
    /// Milliseconds.
    public var responseTimeThreshold: Int?
    public var successRateThreshold: Int?
}

public struct PerformanceTestStarted: Codable, Hashable, Sendable {
    public var config: PerformanceTestConfig?
    public var requestId: String?
}

public struct PerformanceTestResult: Codable, Hashable, Sendable {
    public struct ResponseTimes: Codable, Hashable, Sendable {
        public var average: Int?, p50: Int?, p90: Int?, p95: Int?, p99: Int?
    }
    public var config: PerformanceTestConfig?
    public var target: String?
    /// `PENDING`, `PASS` or `FAIL`.
    public var result: String?
    public var successRate: Int?
    public var numPending: Int?
    public var responseTimes: ResponseTimes?
    /// By send-attempt result (`TIMED_OUT`, `INVALID_RESPONSE`, ...).
    public var failures: [String: Int]?
}
