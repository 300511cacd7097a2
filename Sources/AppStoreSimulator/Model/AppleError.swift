/// An App Store Server API error answer: HTTP status plus Apple's `errorCode`/`errorMessage`.
public struct AppleError: Error, Sendable, Hashable {
    public var httpStatus: Int
    public var code: Int64
    public var message: String

    public init(_ httpStatus: Int, _ code: Int64, _ message: String) {
        self.httpStatus = httpStatus
        self.code = code
        self.message = message
    }

    public static let transactionIdNotFound = AppleError(404, 4_040_010, "Transaction id not found.")
    public static let invalidTransactionId = AppleError(400, 4_000_006, "Invalid transaction id.")
    public static let invalidRevision = AppleError(400, 4_000_005, "Invalid request revision.")
    public static let invalidStatus = AppleError(400, 4_000_031, "Invalid status.")
    public static let rateLimitExceeded = AppleError(429, 4_290_000, "Rate limit exceeded.")
    public static let generalInternalRetryable = AppleError(500, 5_000_001, "An unknown error occurred. Please try again.")
}
