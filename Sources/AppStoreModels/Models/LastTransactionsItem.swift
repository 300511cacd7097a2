/// The newest signed transaction and renewal info of one subscription (`originalTransactionId`).
///
/// [LastTransactionsItem](https://developer.apple.com/documentation/appstoreserverapi/lasttransactionsitem)
public struct LastTransactionsItem: Codable, Hashable, Sendable {
    /// Raw `status` (1 active … 5 revoked). See ``status``.
    public var rawStatus: Int32?
    public var originalTransactionId: String?
    /// Compact JWS of a ``JWSTransactionDecodedPayload``. Unverified until checked.
    public var signedTransactionInfo: String?
    /// Compact JWS of a ``JWSRenewalInfoDecodedPayload``. Unverified until checked.
    public var signedRenewalInfo: String?

    public init(
        rawStatus: Int32? = nil, originalTransactionId: String? = nil,
        signedTransactionInfo: String? = nil, signedRenewalInfo: String? = nil
    ) {
        self.rawStatus = rawStatus
        self.originalTransactionId = originalTransactionId
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
    }

    public enum CodingKeys: String, CodingKey {
        case rawStatus = "status"
        case originalTransactionId, signedTransactionInfo, signedRenewalInfo
    }

    public var status: SubscriptionStatus? {
        get { rawStatus.flatMap(SubscriptionStatus.init(rawValue:)) }
        set { rawStatus = newValue?.rawValue }
    }
}
