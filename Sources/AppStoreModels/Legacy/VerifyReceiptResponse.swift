/// The response of legacy `verifyReceipt`, with its string-typed values decoded.
///
/// `is-retryable` is accepted under both spellings (`is-retryable`, `is_retryable`) as a JSON
/// boolean, number or string, and encoded as `is-retryable`.
///
/// [responseBody](https://developer.apple.com/documentation/appstorereceipts/responsebody)
public struct VerifyReceiptResponse: Codable, Hashable, Sendable {
    /// 0 valid; 21000–21199 errors (21007: sandbox receipt sent to production).
    public var status: Int
    /// `Production` or `Sandbox`.
    public var environment: String?
    public var receipt: LegacyReceipt?
    /// The newest Base64 receipt; store it in place of the one sent.
    public var latestReceipt: String?
    public var latestReceiptInfo: [LegacyReceiptTransaction]?
    public var pendingRenewalInfo: [LegacyPendingRenewalInfo]?
    /// Only for 21100–21199: `true` means a temporary problem.
    public var isRetryable: Bool?

    public init(
        status: Int, environment: String? = nil, receipt: LegacyReceipt? = nil,
        latestReceipt: String? = nil, latestReceiptInfo: [LegacyReceiptTransaction]? = nil,
        pendingRenewalInfo: [LegacyPendingRenewalInfo]? = nil, isRetryable: Bool? = nil
    ) {
        self.status = status
        self.environment = environment
        self.receipt = receipt
        self.latestReceipt = latestReceipt
        self.latestReceiptInfo = latestReceiptInfo
        self.pendingRenewalInfo = pendingRenewalInfo
        self.isRetryable = isRetryable
    }

    public enum CodingKeys: String, CodingKey {
        case status, environment, receipt
        case latestReceipt = "latest_receipt"
        case latestReceiptInfo = "latest_receipt_info"
        case pendingRenewalInfo = "pending_renewal_info"
        case isRetryableHyphen = "is-retryable"
        case isRetryableUnderscore = "is_retryable"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        status = Int(try c.decodeLegacyInt64(.status) ?? -1)
        environment = try c.decodeIfPresent(String.self, forKey: .environment)
        receipt = try c.decodeIfPresent(LegacyReceipt.self, forKey: .receipt)
        latestReceipt = try c.decodeIfPresent(String.self, forKey: .latestReceipt)
        latestReceiptInfo = try c.decodeIfPresent([LegacyReceiptTransaction].self, forKey: .latestReceiptInfo)
        pendingRenewalInfo = try c.decodeIfPresent([LegacyPendingRenewalInfo].self, forKey: .pendingRenewalInfo)
        isRetryable = try c.decodeLegacyBool(.isRetryableHyphen) ?? c.decodeLegacyBool(.isRetryableUnderscore)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(status, forKey: .status)
        try c.encodeIfPresent(environment, forKey: .environment)
        try c.encodeIfPresent(receipt, forKey: .receipt)
        try c.encodeIfPresent(latestReceipt, forKey: .latestReceipt)
        try c.encodeIfPresent(latestReceiptInfo, forKey: .latestReceiptInfo)
        try c.encodeIfPresent(pendingRenewalInfo, forKey: .pendingRenewalInfo)
        try c.encodeIfPresent(isRetryable, forKey: .isRetryableHyphen)
    }
}
