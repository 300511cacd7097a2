import AppStoreModels
@testable import AppStoreServerAPI
import Foundation
import Testing

/// V2 notifications verified as Apple's `verifyAndDecodeNotification` does, plus their inner
/// signed data; and Get Notification History, one page at a time.
@Suite("Notifications V2: verification and history pages")
struct NotificationTests {
    let pki: TestPKI
    let verifier: SignedDataVerifier
    static let appAppleId: Int64 = 1_234_567_890

    init() throws {
        pki = try TestPKI()
        verifier = SignedDataVerifier(rootCertificates: [pki.root], bundleId: Payloads.bundleId)
    }

    /// A DID_CHANGE_RENEWAL_STATUS notification for subscription 2000000000000001.
    func notification(
        uuid: String? = "7c9f1f86-1b8f-4c2a-9a53-0b5b0c1f0e01", bundleId: String = Payloads.bundleId, appAppleId: Int64? = appAppleId,
        environment: AppStoreEnvironment = .production, transaction: JWSTransactionDecodedPayload? = Payloads.transaction(),
        renewal: JWSRenewalInfoDecodedPayload? = Payloads.renewal(autoRenew: .off), signer: TestPKI? = nil
    ) throws -> String {
        let data = NotificationData(
            appAppleId: appAppleId, bundleId: bundleId, rawEnvironment: environment.rawValue,
            signedTransactionInfo: try transaction.map { try pki.sign($0) }, signedRenewalInfo: try renewal.map { try pki.sign($0) }, rawStatus: 1)
        let payload = ResponseBodyV2DecodedPayload(
            notificationType: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", notificationUUID: uuid, data: data,
            version: "2.0", signedDate: TestPKI.signedDate)
        return try (signer ?? pki).sign(payload)
    }

    func expectFailure(_ expected: JWSVerificationFailure, _ jws: String, environment: AppStoreEnvironment = .production,
                       sourceLocation: SourceLocation = #_sourceLocation) async {
        do {
            let n = try await verifier.verifyNotification(jws, environment: environment, appAppleId: Self.appAppleId)
            Issue.record("accepted \(n.notificationUUID)", sourceLocation: sourceLocation)
        } catch {
            #expect(error == expected, sourceLocation: sourceLocation)
        }
    }

    @Test func aGenuineNotificationAndItsInnerDataAreVerifiedAndDecoded() async throws {
        let n = try await verifier.verifyNotification(try notification(), environment: .production, appAppleId: Self.appAppleId)
        #expect(n.notificationUUID == "7c9f1f86-1b8f-4c2a-9a53-0b5b0c1f0e01")
        #expect(n.notificationType == "DID_CHANGE_RENEWAL_STATUS" && n.subtype == "AUTO_RENEW_DISABLED")
        #expect(n.signedDate == TestPKI.signedDate)
        #expect(n.originalTransactionId == "2000000000000001")
        #expect(n.transaction?.transactionId == "2000000000000002")
        #expect(n.renewalInfo?.autoRenewStatus == .off)
        #expect(n.payload.data?.status == .active)
    }

    @Test func appAndEnvironmentAreCheckedAsApplesLibrariesDo() async throws {
        await expectFailure(.bundleIdMismatch(expected: Payloads.bundleId, actual: "com.example.other"), try notification(bundleId: "com.example.other"))
        await expectFailure(.appAppleIdMismatch(expected: Self.appAppleId, actual: 42), try notification(appAppleId: 42))
        await expectFailure(.appAppleIdMismatch(expected: Self.appAppleId, actual: nil), try notification(appAppleId: nil))
        await expectFailure(.environmentMismatch(expected: "Production", actual: "Sandbox"), try notification(environment: .sandbox))
        // Sandbox: the app Apple id is not checked (Apple's libraries do not either).
        let sandbox = try notification(
            appAppleId: 42, environment: .sandbox, transaction: Payloads.transaction(environment: .sandbox),
            renewal: Payloads.renewal(environment: .sandbox))
        let n = try await verifier.verifyNotification(sandbox, environment: .sandbox, appAppleId: Self.appAppleId)
        #expect(n.environment == .sandbox)
        // Production without a configured app Apple id accepts nothing, and says what to set.
        let production = try notification()
        do {
            _ = try await verifier.verifyNotification(production, environment: .production, appAppleId: nil)
            Issue.record("accepted without APPSTORE_APP_APPLE_ID")
        } catch {
            #expect(error == .appAppleIdMismatch(expected: nil, actual: Self.appAppleId))
            #expect(error.description.contains("APPSTORE_APP_APPLE_ID"))
        }
    }

    @Test func theInnerSignedDataIsVerifiedToo() async throws {
        await expectFailure(.bundleIdMismatch(expected: Payloads.bundleId, actual: "com.example.other"),
                            try notification(transaction: Payloads.transaction(bundleId: "com.example.other")))
        await expectFailure(.environmentMismatch(expected: "Production", actual: "Sandbox"),
                            try notification(renewal: Payloads.renewal(environment: .sandbox)))
        await expectFailure(.originalTransactionIdMismatch(expected: "2000000000000001", actual: "2000000000000009"),
                            try notification(renewal: Payloads.renewal(originalTransactionId: "2000000000000009")))
        // An inner JWS signed by a chain to another root.
        let rogue = try TestPKI()
        let data = NotificationData(appAppleId: Self.appAppleId, bundleId: Payloads.bundleId, rawEnvironment: "Production",
                                    signedTransactionInfo: try rogue.sign(Payloads.transaction()))
        let payload = ResponseBodyV2DecodedPayload(notificationType: "DID_RENEW", notificationUUID: "u", data: data, signedDate: TestPKI.signedDate)
        await expectFailure(.untrustedChain, try pki.sign(payload))
    }

    @Test("in two steps (serve's door, then its applier): the notification's own signature and app first, as Apple's libraries check; the inner JWS when completed, with the same failures as in one step")
    func verifiedInTwoSteps() async throws {
        let jws = try notification()
        let outer = try await verifier.verifyNotification(jws, environment: .production, appAppleId: Self.appAppleId, inner: false)
        #expect(!outer.innerVerified && outer.transaction == nil && outer.renewalInfo == nil)
        let whole = try await verifier.completeNotification(outer)
        #expect(whole.innerVerified && whole.transaction?.transactionId == "2000000000000002" && whole.renewalInfo?.autoRenewStatus == .off)
        #expect(whole == (try await verifier.verifyNotification(jws, environment: .production, appAppleId: Self.appAppleId)))
        // The first step refuses what it checks: another chain, another app.
        await #expect(throws: JWSVerificationFailure.untrustedChain) {
            try await verifier.verifyNotification(try notification(signer: try TestPKI()), environment: .production, appAppleId: Self.appAppleId, inner: false)
        }
        await #expect(throws: JWSVerificationFailure.bundleIdMismatch(expected: Payloads.bundleId, actual: "com.example.other")) {
            try await verifier.verifyNotification(try notification(bundleId: "com.example.other"), environment: .production,
                                                  appAppleId: Self.appAppleId, inner: false)
        }
        // An inner JWS of another root passes the first step and fails the second.
        let rogue = try TestPKI()
        let data = NotificationData(appAppleId: Self.appAppleId, bundleId: Payloads.bundleId, rawEnvironment: "Production",
                                    signedTransactionInfo: try rogue.sign(Payloads.transaction()))
        let payload = ResponseBodyV2DecodedPayload(notificationType: "DID_RENEW", notificationUUID: "u", data: data, signedDate: TestPKI.signedDate)
        let first = try await verifier.verifyNotification(try pki.sign(payload), environment: .production, appAppleId: Self.appAppleId, inner: false)
        await #expect(throws: JWSVerificationFailure.untrustedChain) { try await verifier.completeNotification(first) }
        let mismatched = try await verifier.verifyNotification(
            try notification(renewal: Payloads.renewal(originalTransactionId: "2000000000000009")), environment: .production,
            appAppleId: Self.appAppleId, inner: false)
        await #expect(throws: JWSVerificationFailure.originalTransactionIdMismatch(expected: "2000000000000001", actual: "2000000000000009")) {
            try await verifier.completeNotification(mismatched)
        }
    }

    @Test func forgedTruncatedOrKeylessNotificationsAreRejected() async throws {
        await expectFailure(.untrustedChain, try notification(signer: try TestPKI()))
        let jws = try notification()
        await expectFailure(.notThreeParts(2), String(jws[..<jws.lastIndex(of: ".")!]))
        await expectFailure(.malformedPayload, try notification(uuid: nil))
        await expectFailure(.malformedPayload, try notification(uuid: ""))
        // Neither data, summary nor externalPurchaseToken: nothing names the app.
        await expectFailure(.malformedPayload, try pki.sign(ResponseBodyV2DecodedPayload(notificationType: "TEST", notificationUUID: "u", signedDate: TestPKI.signedDate)))
    }

    @Test func historyPagesPostTheSameBodyAndFollowThePaginationToken() async throws {
        let first = try notification(uuid: "a"), second = try notification(uuid: "b")
        let transport = ScriptedTransport { request, index in
            let records = [NotificationHistoryResponseItem(signedPayload: index == 0 ? first : second,
                                                           sendAttempts: [SendAttemptItem(attemptDate: 1, sendAttemptResult: "SUCCESS")])]
            return ScriptedTransport.json(200, NotificationHistoryResponse(
                notificationHistory: records, hasMore: index == 0, paginationToken: index == 0 ? "tok-1" : ""))
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: TestClock())
        let request = NotificationHistoryRequest(startDate: 1_000, endDate: 2_000)
        let page1 = try #require(await client.notificationHistoryPage(request).value)
        #expect(page1.hasMore && page1.paginationToken == "tok-1" && page1.records.count == 1)
        let page2 = try #require(await client.notificationHistoryPage(request, paginationToken: page1.paginationToken).value)
        #expect(!page2.hasMore && page2.paginationToken == nil)
        let sent = transport.requests
        #expect(sent.map(\.method) == ["POST", "POST"])
        #expect(sent.allSatisfy { $0.url.path == "/inApps/v1/notifications/history" })
        #expect(sent[0].queryItems.isEmpty)
        #expect(sent[1].queryItems.map { "\($0.0)=\($0.1)" } == ["paginationToken=tok-1"])
        #expect(sent[0].body == sent[1].body)
        let body = try JSONSerialization.jsonObject(with: try #require(sent[0].body)) as? [String: Any]
        #expect(body?["startDate"] as? Int == 1_000 && body?["endDate"] as? Int == 2_000)
        #expect(sent[0].headers.contains { $0.name == "Authorization" && $0.value.hasPrefix("Bearer ") })
        let verified = try await client.verifyNotification(try #require(page2.records.first?.signedPayload))
        #expect(verified.notificationUUID == "b")
    }

    @Test func aPageClaimingMoreWithoutATokenAndApplesErrorsAreOutcomes() async throws {
        let transport = ScriptedTransport { _, index in
            index == 0
                ? ScriptedTransport.json(200, NotificationHistoryResponse(notificationHistory: [], hasMore: true, paginationToken: nil))
                : ScriptedTransport.error(400, 4_000_014)
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: TestClock())
        let request = NotificationHistoryRequest(startDate: 1_000, endDate: 2_000)
        guard case .malformedResponse(let why) = await client.notificationHistoryPage(request) else { Issue.record("accepted"); return }
        #expect(why.contains("paginationToken"))
        guard case .badRequest(let code) = await client.notificationHistoryPage(request, paginationToken: "stale") else { Issue.record("no 400"); return }
        #expect(code == .invalidPaginationToken)
    }
}
