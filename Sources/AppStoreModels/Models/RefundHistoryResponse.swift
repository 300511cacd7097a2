/// One page of Get Refund History (v2), in ascending `revocationDate` order.
///
/// [RefundHistoryResponse](https://developer.apple.com/documentation/appstoreserverapi/refundhistoryresponse)
public struct RefundHistoryResponse: Codable, Hashable, Sendable {
    /// Compact JWS strings of refunded ``JWSTransactionDecodedPayload``s; empty without refunds.
    public var signedTransactions: [String]?
    /// Token for the next page; the last one can be stored to poll for newer refunds only.
    public var revision: String?
    public var hasMore: Bool?

    public init(signedTransactions: [String]? = nil, revision: String? = nil, hasMore: Bool? = nil) {
        self.signedTransactions = signedTransactions
        self.revision = revision
        self.hasMore = hasMore
    }
}
