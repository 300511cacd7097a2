/// The Retention Messaging API's JSON bodies, as the simulator reads and writes them (field
/// names from Apple's Python library 3.1.2, `models/*.py`). A namespace, so that they never meet
/// churnwatch's own client types of the same names in a file that imports both.
enum RetentionWire {
    /// `UploadMessageImage`.
    struct UploadMessageImage: Codable, Sendable, Hashable {
        var imageIdentifier: String
        var altText: String
    }

    /// `BulletPoint`.
    struct BulletPoint: Codable, Sendable, Hashable {
        var text: String
        var imageIdentifier: String
        var altText: String
    }

    /// `UploadMessageRequestBody`.
    struct UploadMessageRequestBody: Codable, Sendable, Hashable {
        var header: String
        var body: String
        var image: UploadMessageImage?
        /// `ABOVE_BODY` (default) or `ABOVE_IMAGE`.
        var headerPosition: String?
        var bulletPoints: [BulletPoint]?
    }

    /// `GetImageListResponseItem`.
    struct ImageItem: Codable, Sendable, Hashable {
        var imageIdentifier: String
        var imageState: String
        var imageSize: String?
    }

    /// `GetImageListResponse`.
    struct ImageList: Codable, Sendable {
        var imageIdentifiers: [ImageItem]
    }

    /// `GetMessageListResponseItem`.
    struct MessageItem: Codable, Sendable, Hashable {
        var messageIdentifier: String
        var messageState: String
    }

    /// `GetMessageListResponse`.
    struct MessageList: Codable, Sendable {
        var messageIdentifiers: [MessageItem]
    }

    /// `DefaultConfigurationRequest` and `DefaultConfigurationResponse`.
    struct DefaultConfiguration: Codable, Sendable {
        var messageIdentifier: String?
    }

    /// `RealtimeUrlRequest` and `RealtimeUrlResponse`.
    struct RealtimeURL: Codable, Sendable {
        var realtimeURL: String?
    }

    /// `PerformanceTestRequest`.
    struct PerformanceTestRequest: Codable, Sendable {
        var originalTransactionId: String?
    }

    /// `PerformanceTestConfig` (durations in ms; the success rate threshold a percentage).
    struct PerformanceTestConfig: Codable, Sendable, Hashable {
        var maxConcurrentRequests: Int
        var totalRequests: Int
        var totalDuration: Int64
        var responseTimeThreshold: Int64
        var successRateThreshold: Int

        init(_ s: PerformanceTestSettings) {
            maxConcurrentRequests = s.maxConcurrentRequests
            totalRequests = s.totalRequests
            totalDuration = s.totalDurationMs
            responseTimeThreshold = s.responseTimeThresholdMs
            successRateThreshold = s.successRatePercent
        }
    }

    /// `PerformanceTestResponse`.
    struct PerformanceTestResponse: Codable, Sendable {
        var config: PerformanceTestConfig
        var requestId: String
    }

    /// `PerformanceTestResponseTimes` (ms).
    struct ResponseTimes: Codable, Sendable, Hashable {
        var average: Int64
        var p50: Int64
        var p90: Int64
        var p95: Int64
        var p99: Int64
    }

    /// `PerformanceTestResultResponse`: `result` PENDING, PASS or FAIL; `successRate` a
    /// percentage of `totalRequests`; `failures` by `SendAttemptResult`.
    struct PerformanceTestResult: Codable, Sendable {
        var config: PerformanceTestConfig
        var target: String
        var result: String
        var successRate: Int
        var numPending: Int
        var responseTimes: ResponseTimes?
        var failures: [String: Int]
    }

    /// The claims of a promotional offer's V2 signature that the cancel page reads (unverified).
    struct PromotionalOfferClaims: Decodable, Sendable {
        var bid: String?
        var productId: String?
        var offerIdentifier: String?
    }
}

extension AppleError {
    // The Retention Messaging API's errors (Apple's Python library 3.1.2, `APIError`).
    static let generalBadRequest = AppleError(400, 4_000_000, "Bad request.")
    static let invalidProductId = AppleError(400, 4_000_023, "Invalid product id.")
    static let invalidImage = AppleError(400, 4_000_161, "The image is invalid.")
    static let headerTooLong = AppleError(400, 4_000_162, "The header text is too long.")
    static let bodyTooLong = AppleError(400, 4_000_163, "The body text is too long.")
    static let invalidLocale = AppleError(400, 4_000_164, "The locale is invalid.")
    static let altTextTooLong = AppleError(400, 4_000_175, "The alternative text for an image is too long.")
    static let invalidPerformanceTestRequest = AppleError(400, 4_000_211, "The performance test request is invalid.")
    static let invalidRequestId = AppleError(400, 4_000_212, "The request ID is invalid.")
    static let existingPerformanceTestRun = AppleError(400, 4_000_213, "A performance test is already running.")
    static let badRequestRealtimeURL = AppleError(400, 4_000_215, "The URL is invalid.")
    static let badRequestImageSize = AppleError(400, 4_000_216, "The image size is invalid.")
    static let tooManyBulletPoints = AppleError(400, 4_000_218, "There are too many bullet points.")
    static let bulletPointTextTooLong = AppleError(400, 4_000_219, "The text of a bullet point is too long.")
    static let aboveImageRequiresAnImage = AppleError(400, 4_000_224, "The header is placed above an image, but there is no image.")
    static let messageNotApproved = AppleError(403, 4_030_017, "The message is not approved.")
    static let imageNotApproved = AppleError(403, 4_030_018, "The image is not approved.")
    static let imageInUse = AppleError(403, 4_030_019, "The image is in use by a message.")
    static let forbiddenNoPassingTest = AppleError(403, 4_030_026, "A passing performance test is required before setting the production URL.")
    static let originalTransactionIdNotFound = AppleError(404, 4_040_005, "Original transaction id not found.")
    static let imageNotFound = AppleError(404, 4_040_014, "Image not found.")
    static let messageNotFound = AppleError(404, 4_040_015, "Message not found.")
    static let performanceTestRunNotFound = AppleError(404, 4_040_018, "Performance test run not found.")
    static let defaultMessageNotFound = AppleError(404, 4_040_020, "Default message not found.")
    static let realtimeURLNotFound = AppleError(404, 4_040_021, "Realtime URL not found.")
    static let imageAlreadyExists = AppleError(409, 4_090_000, "The image identifier already exists.")
    static let messageAlreadyExists = AppleError(409, 4_090_001, "The message identifier already exists.")
}
