import AppStoreModels

/// Get All Subscription Statuses with every signed payload verified and decoded.
public struct VerifiedSubscriptionStatuses: Sendable, Hashable {
    /// One subscription (`originalTransactionId`) of a subscription group.
    public struct Subscription: Sendable, Hashable {
        /// Raw `status` (1 active … 5 revoked). See ``status``.
        public var rawStatus: Int32?
        public var originalTransactionId: String?
        /// The newest transaction, verified.
        public var transaction: JWSTransactionDecodedPayload
        /// Its renewal info, verified; `nil` when Apple sent none.
        public var renewalInfo: JWSRenewalInfoDecodedPayload?
        /// The JWS as received, for storage.
        public var signedTransactionInfo: String
        public var signedRenewalInfo: String?

        public var status: SubscriptionStatus? { rawStatus.flatMap(SubscriptionStatus.init(rawValue:)) }
    }

    public struct Group: Sendable, Hashable {
        public var subscriptionGroupIdentifier: String?
        public var subscriptions: [Subscription]
    }

    /// An item of the answer whose signed data failed verification. Its neighbours are still
    /// usable: each item is verified on its own.
    public struct Rejected: Error, Sendable, Hashable {
        /// The id the unsigned item claims (not to be trusted; for matching only).
        public var originalTransactionId: String?
        public var failure: JWSVerificationFailure
        /// The rejected JWS as received, for quarantine.
        public var payload: String
    }

    /// The environment that answered.
    public var environment: AppStoreEnvironment
    public var bundleId: String?
    public var appAppleId: Int64?
    public var groups: [Group]
    /// Items that failed verification, left out of ``groups``.
    public var rejected: [Rejected] = []

    /// Every subscription of every group.
    public var subscriptions: [Subscription] { groups.flatMap(\.subscriptions) }
}

/// The whole transaction history (every page) with each transaction verified.
public struct VerifiedTransactionHistory: Sendable, Hashable {
    /// The environment that answered.
    public var environment: AppStoreEnvironment
    public var bundleId: String?
    public var appAppleId: Int64?
    /// In the order Apple sent them, page after page. With ascending order a transaction can
    /// appear again later with newer data: ingest idempotently on `transactionId`.
    public var transactions: [JWSTransactionDecodedPayload]
    /// The JWS strings as received, parallel to ``transactions``.
    public var signedTransactions: [String]
    /// The `revision` of the last page.
    public var revision: String?
    /// Pages fetched.
    public var pages: Int
}

/// One transaction from Get Transaction Info, verified.
public struct VerifiedTransaction: Sendable, Hashable {
    public var environment: AppStoreEnvironment
    public var transaction: JWSTransactionDecodedPayload
    public var signedTransactionInfo: String
}

/// Refunds from Get Refund History (v2), every page, verified; ``revision`` is the last one, to
/// pass next time so only newer refunds come back.
public struct VerifiedRefundHistory: Sendable, Hashable {
    public var environment: AppStoreEnvironment
    public var transactions: [JWSTransactionDecodedPayload]
    public var signedTransactions: [String]
    public var revision: String?
    public var pages: Int
}

/// The answer of legacy verifyReceipt. Apple validated the receipt; its content is not a JWS.
public struct LegacyReceiptResult: Sendable, Hashable {
    /// The environment whose verifyReceipt answered.
    public var environment: AppStoreEnvironment
    public var response: VerifyReceiptResponse
    /// The newest Base64 receipt to store in place of the one sent (`latest_receipt`, or the
    /// one sent when Apple returned none).
    public var latestReceipt: String
}
