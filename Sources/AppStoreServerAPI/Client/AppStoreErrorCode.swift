/// An error code from Apple: the `errorCode` of an App Store Server API error body, or the
/// `status` of a legacy verifyReceipt response. Unknown codes are kept as they are.
public struct AppStoreErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ rawValue: Int64) { self.rawValue = rawValue }

    public static let generalBadRequest = Self(4_000_000)
    public static let invalidAppIdentifier = Self(4_000_002)
    public static let invalidRequestRevision = Self(4_000_005)
    public static let invalidTransactionId = Self(4_000_006)
    public static let invalidOriginalTransactionId = Self(4_000_008)
    public static let startDateTooFarInPast = Self(4_000_012)
    public static let startDateAfterEndDate = Self(4_000_013)
    public static let invalidPaginationToken = Self(4_000_014)
    public static let paginationTokenExpired = Self(4_000_017)
    public static let invalidNotificationSubtype = Self(4_000_018)
    public static let multipleFiltersSupplied = Self(4_000_019)
    public static let invalidStatus = Self(4_000_031)
    /// Send Consumption Information: `customerConsented` is not true.
    public static let invalidCustomerConsented = Self(4_000_035)
    public static let invalidDeliveryStatus = Self(4_000_036)
    public static let invalidSampleContentProvided = Self(4_000_041)
    public static let appTransactionIdNotSupported = Self(4_000_048)
    public static let accountNotFound = Self(4_040_001)
    public static let accountNotFoundRetryable = Self(4_040_002)
    public static let appNotFound = Self(4_040_003)
    public static let appNotFoundRetryable = Self(4_040_004)
    public static let originalTransactionIdNotFound = Self(4_040_005)
    public static let originalTransactionIdNotFoundRetryable = Self(4_040_006)
    public static let transactionIdNotFound = Self(4_040_010)
    public static let rateLimitExceeded = Self(4_290_000)
    public static let generalInternal = Self(5_000_000)
    public static let generalInternalRetryable = Self(5_000_001)

    /// Apple's "errors to retry" (4040002, 4040004, 4040006, 5000001).
    public var isRetryable: Bool {
        [.accountNotFoundRetryable, .appNotFoundRetryable, .originalTransactionIdNotFoundRetryable, .generalInternalRetryable].contains(self)
    }

    /// Apple's name for a known code.
    public var name: String? {
        switch rawValue {
        case 4_000_000: "GeneralBadRequest"
        case 4_000_002: "InvalidAppIdentifier"
        case 4_000_005: "InvalidRequestRevision"
        case 4_000_006: "InvalidTransactionId"
        case 4_000_008: "InvalidOriginalTransactionId"
        case 4_000_012: "StartDateTooFarInPast"
        case 4_000_013: "StartDateAfterEndDate"
        case 4_000_014: "InvalidPaginationToken"
        case 4_000_017: "PaginationTokenExpired"
        case 4_000_018: "InvalidNotificationSubtype"
        case 4_000_019: "MultipleFiltersSupplied"
        case 4_000_015: "InvalidStartDate"
        case 4_000_016: "InvalidEndDate"
        case 4_000_021: "InvalidSort"
        case 4_000_022: "InvalidProductType"
        case 4_000_023: "InvalidProductId"
        case 4_000_024: "InvalidSubscriptionGroupIdentifier"
        case 4_000_025: "InvalidExcludeRevoked"
        case 4_000_026: "InvalidInAppOwnershipType"
        case 4_000_030: "InvalidRevoked"
        case 4_000_031: "InvalidStatus"
        case 4_000_035: "InvalidCustomerConsented"
        case 4_000_036: "InvalidDeliveryStatus"
        case 4_000_041: "InvalidSampleContentProvided"
        case 4_000_048: "AppTransactionIdNotSupported"
        case 4_000_187: "TransactionIdIsNotOriginalTransactionId"
        case 4_040_001: "AccountNotFound"
        case 4_040_002: "AccountNotFoundRetryable"
        case 4_040_003: "AppNotFound"
        case 4_040_004: "AppNotFoundRetryable"
        case 4_040_005: "OriginalTransactionIdNotFound"
        case 4_040_006: "OriginalTransactionIdNotFoundRetryable"
        case 4_040_010: "TransactionIdNotFound"
        case 4_040_019: "AppTransactionDoesNotExist"
        case 4_290_000: "RateLimitExceeded"
        case 5_000_000: "GeneralInternal"
        case 5_000_001: "GeneralInternalRetryable"
        case 21_000: "verifyReceipt: not a POST"
        case 21_002: "verifyReceipt: malformed receipt-data or temporary problem"
        case 21_003: "verifyReceipt: receipt not authenticated"
        case 21_004: "verifyReceipt: shared secret mismatch"
        case 21_005: "verifyReceipt: receipt server unavailable"
        case 21_007: "verifyReceipt: sandbox receipt sent to production"
        case 21_008: "verifyReceipt: production receipt sent to sandbox"
        case 21_009: "verifyReceipt: internal data access error"
        case 21_010: "verifyReceipt: account not found"
        case 21_100...21_199: "verifyReceipt: internal data access error"
        default: nil
        }
    }

    public var description: String { name.map { "\(rawValue) \($0)" } ?? String(rawValue) }
}
