/// Response of Get Transaction Info.
///
/// [TransactionInfoResponse](https://developer.apple.com/documentation/appstoreserverapi/transactioninforesponse)
public struct TransactionInfoResponse: Codable, Hashable, Sendable {
    /// Compact JWS of a ``JWSTransactionDecodedPayload``.
    public var signedTransactionInfo: String?

    public init(signedTransactionInfo: String? = nil) {
        self.signedTransactionInfo = signedTransactionInfo
    }
}
