/// The decoded receipt in a ``VerifyReceiptResponse`` (the fields churnwatch reads).
///
/// [responseBody.Receipt](https://developer.apple.com/documentation/appstorereceipts/responsebody/receipt)
public struct LegacyReceipt: Codable, Hashable, Sendable {
    /// `Production`, `ProductionVPP`, `ProductionSandbox` or `ProductionVPPSandbox`.
    public var receiptType: String?
    public var bundleId: String?
    /// The app's Apple ID (absent in sandbox).
    public var appItemId: Int64?
    public var applicationVersion: String?
    public var originalApplicationVersion: String?
    public var receiptCreationDate: EpochMilliseconds?
    public var requestDate: EpochMilliseconds?
    public var originalPurchaseDate: EpochMilliseconds?
    /// In-app purchases in the receipt, in no particular order.
    public var inApp: [LegacyReceiptTransaction]?

    public init(
        receiptType: String? = nil, bundleId: String? = nil, appItemId: Int64? = nil,
        applicationVersion: String? = nil, originalApplicationVersion: String? = nil,
        receiptCreationDate: EpochMilliseconds? = nil, requestDate: EpochMilliseconds? = nil,
        originalPurchaseDate: EpochMilliseconds? = nil, inApp: [LegacyReceiptTransaction]? = nil
    ) {
        self.receiptType = receiptType
        self.bundleId = bundleId
        self.appItemId = appItemId
        self.applicationVersion = applicationVersion
        self.originalApplicationVersion = originalApplicationVersion
        self.receiptCreationDate = receiptCreationDate
        self.requestDate = requestDate
        self.originalPurchaseDate = originalPurchaseDate
        self.inApp = inApp
    }

    public enum CodingKeys: String, CodingKey {
        case receiptType = "receipt_type"
        case bundleId = "bundle_id"
        case appItemId = "app_item_id"
        case applicationVersion = "application_version"
        case originalApplicationVersion = "original_application_version"
        case receiptCreationDate = "receipt_creation_date_ms"
        case requestDate = "request_date_ms"
        case originalPurchaseDate = "original_purchase_date_ms"
        case inApp = "in_app"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        receiptType = try c.decodeIfPresent(String.self, forKey: .receiptType)
        bundleId = try c.decodeIfPresent(String.self, forKey: .bundleId)
        appItemId = try c.decodeLegacyInt64(.appItemId)
        applicationVersion = try c.decodeIfPresent(String.self, forKey: .applicationVersion)
        originalApplicationVersion = try c.decodeIfPresent(String.self, forKey: .originalApplicationVersion)
        receiptCreationDate = try c.decodeLegacyDate(.receiptCreationDate)
        requestDate = try c.decodeLegacyDate(.requestDate)
        originalPurchaseDate = try c.decodeLegacyDate(.originalPurchaseDate)
        inApp = try c.decodeIfPresent([LegacyReceiptTransaction].self, forKey: .inApp)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(receiptType, forKey: .receiptType)
        try c.encodeIfPresent(bundleId, forKey: .bundleId)
        try c.encodeIfPresent(appItemId, forKey: .appItemId)
        try c.encodeIfPresent(applicationVersion, forKey: .applicationVersion)
        try c.encodeIfPresent(originalApplicationVersion, forKey: .originalApplicationVersion)
        try c.encodeLegacy(receiptCreationDate, forKey: .receiptCreationDate)
        try c.encodeLegacy(requestDate, forKey: .requestDate)
        try c.encodeLegacy(originalPurchaseDate, forKey: .originalPurchaseDate)
        try c.encodeIfPresent(inApp, forKey: .inApp)
    }
}
