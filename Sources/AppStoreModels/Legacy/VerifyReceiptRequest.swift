/// The body of a legacy `POST /verifyReceipt`.
///
/// [requestBody](https://developer.apple.com/documentation/appstorereceipts/requestbody)
public struct VerifyReceiptRequest: Codable, Hashable, Sendable {
    /// The Base64 receipt as the app stored it.
    public var receiptData: String
    /// The app's shared secret (hex); required for receipts with auto-renewables.
    public var password: String?
    /// Only the newest renewal of each subscription in `latest_receipt_info`.
    public var excludeOldTransactions: Bool?

    public init(receiptData: String, password: String? = nil, excludeOldTransactions: Bool? = nil) {
        self.receiptData = receiptData
        self.password = password
        self.excludeOldTransactions = excludeOldTransactions
    }

    public enum CodingKeys: String, CodingKey {
        case receiptData = "receipt-data"
        case password
        case excludeOldTransactions = "exclude-old-transactions"
    }
}
