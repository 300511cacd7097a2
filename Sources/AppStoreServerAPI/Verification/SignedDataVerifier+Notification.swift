import AppStoreModels

extension ResponseBodyV2DecodedPayload: SignedPayload {
    public var signedDateMilliseconds: Int64? { signedDate?.rawValue }
}

/// A V2 notification whose signature, chain, app and environment were verified, with the signed
/// transaction and renewal info it carries, verified too.
public struct VerifiedNotification: Sendable, Hashable {
    public var payload: ResponseBodyV2DecodedPayload
    /// Deduplication key; never empty.
    public var notificationUUID: String
    /// The moment the notification describes the subscription at.
    public var signedDate: EpochMilliseconds
    public var environment: AppStoreEnvironment
    /// `data.signedTransactionInfo`, verified; nil when the notification carries none.
    public var transaction: JWSTransactionDecodedPayload?
    /// `data.signedRenewalInfo`, verified; nil when the notification carries none.
    public var renewalInfo: JWSRenewalInfoDecodedPayload?
    /// False when only the notification's own signature was verified (`inner: false`): then
    /// `transaction` and `renewalInfo` are nil until ``SignedDataVerifier/completeNotification(_:)``.
    public var innerVerified = true

    public var notificationType: String? { payload.notificationType }
    public var subtype: String? { payload.subtype }
    /// The subscription the notification is about (nil for notifications about no transaction).
    public var originalTransactionId: String? { transaction?.originalTransactionId ?? renewalInfo?.originalTransactionId }
}

extension SignedDataVerifier {
    /// Verifies a notification's `signedPayload` as Apple's libraries do
    /// (`verifyAndDecodeNotification`): signature and chain; then `bundleId`, and `appAppleId` in
    /// Production, of `data` (else `summary`, else `externalPurchaseToken`); then `environment`.
    /// Goes further than Apple's libraries: the inner `signedTransactionInfo` and
    /// `signedRenewalInfo` are verified in the same environment and must name one subscription,
    /// and `notificationUUID` and `signedDate` must be present (they are the feed's keys).
    ///
    /// With `inner: false`, only what Apple's libraries check (the notification's signature,
    /// chain and app): its inner JWS are bytes of the payload that signature covers, and are
    /// verified by ``completeNotification(_:)`` before anything is decided from them.
    public func verifyNotification(
        _ signedPayload: String, environment: AppStoreEnvironment, appAppleId: Int64?, inner: Bool = true
    ) async throws(JWSVerificationFailure) -> VerifiedNotification {
        let payload = try await verify(signedPayload, as: ResponseBodyV2DecodedPayload.self)
        try Self.checkApp(payload, bundleId: bundleId, environment: environment, appAppleId: appAppleId)
        guard let uuid = payload.notificationUUID, !uuid.isEmpty, let signedDate = payload.signedDate else {
            throw .malformedPayload
        }
        let outer = VerifiedNotification(payload: payload, notificationUUID: uuid, signedDate: signedDate, environment: environment,
                                         innerVerified: false)
        return inner ? try await completeNotification(outer) : outer
    }

    /// A notification verified with `inner: false`, its inner signed transaction and renewal
    /// info verified in its environment (they must name one subscription). One verified
    /// whole already is returned as it is.
    public func completeNotification(_ outer: VerifiedNotification) async throws(JWSVerificationFailure) -> VerifiedNotification {
        guard !outer.innerVerified else { return outer }
        let (payload, environment) = (outer.payload, outer.environment)
        var verified = outer
        verified.innerVerified = true
        if let jws = payload.data?.signedTransactionInfo {
            verified.transaction = try await verifyTransaction(jws, environment: environment)
        }
        if let jws = payload.data?.signedRenewalInfo {
            let renewal = try await verifyRenewalInfo(jws, environment: environment)
            if let transaction = verified.transaction, transaction.originalTransactionId != renewal.originalTransactionId {
                throw .originalTransactionIdMismatch(expected: transaction.originalTransactionId, actual: renewal.originalTransactionId)
            }
            verified.renewalInfo = renewal
        }
        return verified
    }

    /// Apple's app and environment checks of a notification.
    static func checkApp(
        _ payload: ResponseBodyV2DecodedPayload, bundleId expectedBundle: String, environment: AppStoreEnvironment, appAppleId: Int64?
    ) throws(JWSVerificationFailure) {
        let bundle: String?, appId: Int64?, env: String?
        if let data = payload.data {
            (bundle, appId, env) = (data.bundleId, data.appAppleId, data.rawEnvironment)
        } else if let summary = payload.summary {
            (bundle, appId, env) = (summary.bundleId, summary.appAppleId, summary.rawEnvironment)
        } else if let token = payload.externalPurchaseToken {
            let sandbox = token.externalPurchaseId?.hasPrefix("SANDBOX") == true
            (bundle, appId, env) = (token.bundleId, token.appAppleId, sandbox ? AppStoreEnvironment.sandbox.rawValue : AppStoreEnvironment.production.rawValue)
        } else {
            throw .malformedPayload
        }
        guard bundle == expectedBundle else { throw .bundleIdMismatch(expected: expectedBundle, actual: bundle) }
        if environment == .production, appId != appAppleId || appAppleId == nil {
            throw .appAppleIdMismatch(expected: appAppleId, actual: appId)
        }
        guard env == environment.rawValue else { throw .environmentMismatch(expected: environment.rawValue, actual: env) }
    }
}
