import AppStoreModels

extension DecodedRealtimeRequestBody: SignedPayload {
    public var signedDateMilliseconds: Int64? { signedDate.rawValue }
}

extension SignedDataVerifier {
    /// Verifies a Get Retention Message request's `signedPayload` as Apple's libraries do
    /// (`verifyAndDecodeRealtimeRequest`): signature and chain; then `appAppleId` in Production;
    /// then `environment`. The request carries no bundle id: its app is the one whose app Apple id
    /// it names, in Sandbox too (checked by the caller, which chose the app by it).
    public func verifyRealtimeRequest(
        _ signedPayload: String, environment: AppStoreEnvironment, appAppleId: Int64?
    ) async throws(JWSVerificationFailure) -> DecodedRealtimeRequestBody {
        let payload = try await verify(signedPayload, as: DecodedRealtimeRequestBody.self)
        if environment == .production, payload.appAppleId != appAppleId || appAppleId == nil {
            throw .appAppleIdMismatch(expected: appAppleId, actual: payload.appAppleId)
        }
        guard payload.rawEnvironment == environment.rawValue else {
            throw .environmentMismatch(expected: environment.rawValue, actual: payload.rawEnvironment)
        }
        guard !payload.originalTransactionId.isEmpty, !payload.requestIdentifier.isEmpty else { throw .malformedPayload }
        return payload
    }
}

extension AppStoreServerAPIClient {
    /// A Get Retention Message request verified for this client's app: its environment, or
    /// Sandbox when `alsoSandbox` (the performance test runs there).
    public func verifyRealtimeRequest(_ signedPayload: String, alsoSandbox: Bool) async throws(JWSVerificationFailure) -> DecodedRealtimeRequestBody {
        do {
            return try await verifier.verifyRealtimeRequest(signedPayload, environment: configuration.environment,
                                                            appAppleId: configuration.appAppleId)
        } catch {
            guard alsoSandbox, case .environmentMismatch(_, let actual) = error, actual == AppStoreEnvironment.sandbox.rawValue else { throw error }
            return try await verifier.verifyRealtimeRequest(signedPayload, environment: .sandbox, appAppleId: configuration.appAppleId)
        }
    }
}
