@testable import AppStoreServerAPI
import Crypto
import Foundation
import Logging
import Testing

@Suite("Client: endpoints, outcomes, auth, retries")
struct AppStoreServerAPIClientTests {
    let pki: TestPKI
    let responses: Responses
    let clock = TestClock()

    init() throws {
        pki = try TestPKI()
        responses = Responses(pki: pki)
    }

    @Test func statusesAreVerifiedAndFilterParametersRepeat() async throws {
        let body = try responses.status()
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.json(200, body) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let outcome = await client.subscriptionStatuses(for: "2000000000000001", status: [.active, .billingGracePeriod])
        let value = try #require(outcome.value, "\(outcome)")
        #expect(value.environment == .production)
        #expect(value.subscriptions.count == 1)
        #expect(value.subscriptions[0].status == .active)
        #expect(value.subscriptions[0].transaction.originalTransactionId == "2000000000000001")
        #expect(value.subscriptions[0].renewalInfo?.autoRenewStatus == .on)
        let request = try #require(transport.requests.first)
        #expect(request.method == "GET")
        #expect(request.url.absoluteString == "https://prod.test/inApps/v1/subscriptions/2000000000000001?status=1&status=4")
        #expect(request.header("Authorization")?.hasPrefix("Bearer ") == true)
        #expect(request.header("Accept") == "application/json")
    }

    @Test func historyPagesToTheEndWithTheSameFilters() async throws {
        let pages = 3
        let responses = self.responses
        let transport = ScriptedTransport(clock: clock) { _, index in
            ScriptedTransport.json(200, try responses.history(page: index, of: pages))
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let filters = TransactionHistoryRequest(
            startDate: 1_700_000_000_000, endDate: 1_800_000_000_000, productIds: ["a", "b"],
            productTypes: [.nonConsumable, .autoRenewable], subscriptionGroupIdentifiers: ["g1"],
            inAppOwnershipType: .familyShared, sort: .descending, revoked: false)
        let outcome = await client.transactionHistory(for: "2000000000000001", filters: filters)
        let history = try #require(outcome.value, "\(outcome)")
        #expect(history.pages == 3)
        #expect(history.transactions.map(\.transactionId) == ["0", "1", "100", "101", "200", "201"])
        #expect(history.signedTransactions.count == 6)
        #expect(history.revision == "rev-3")

        let requests = transport.requests
        #expect(requests.count == 3)
        let expectedFilters: [(String, String)] = [
            ("startDate", "1700000000000"), ("endDate", "1800000000000"), ("productId", "a"), ("productId", "b"),
            ("productType", "NON_CONSUMABLE"), ("productType", "AUTO_RENEWABLE"), ("subscriptionGroupIdentifier", "g1"),
            ("inAppOwnershipType", "FAMILY_SHARED"), ("sort", "DESCENDING"), ("revoked", "false"),
        ]
        for (i, request) in requests.enumerated() {
            #expect(request.url.path == "/inApps/v2/history/2000000000000001")
            var items = request.queryItems
            if i == 0 {
                #expect(!items.contains { $0.0 == "revision" })
            } else {
                #expect(items.first?.0 == "revision" && items.first?.1 == "rev-\(i)")
                items.removeFirst()
            }
            #expect(items.map { "\($0.0)=\($0.1)" } == expectedFilters.map { "\($0.0)=\($0.1)" })
        }
    }

    @Test func refundHistoryReturnsTheLastRevision() async throws {
        let pki = self.pki
        let transport = ScriptedTransport(clock: clock) { request, index in
            let signed = try pki.sign(Payloads.transaction(transactionId: "r\(index)"))
            return ScriptedTransport.json(200, RefundHistoryResponse(signedTransactions: [signed], revision: "refund-\(index + 1)", hasMore: index == 0))
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let outcome = await client.refundHistory(for: "1", after: "refund-0")
        let refunds = try #require(outcome.value)
        #expect(refunds.revision == "refund-2")
        #expect(refunds.transactions.map(\.transactionId) == ["r0", "r1"])
        #expect(transport.requests.map { $0.queryItems.first?.1 } == ["refund-0", "refund-1"])
        #expect(transport.requests[0].url.path == "/inApps/v2/refund/lookup/1")
    }

    @Test func transactionInfoIsVerified() async throws {
        let signed = try pki.sign(Payloads.transaction(bundleId: "com.other.app"))
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.json(200, TransactionInfoResponse(signedTransactionInfo: signed)) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        guard case .verificationFailed(.bundleIdMismatch, _) = await client.transactionInfo(for: "1") else {
            Issue.record("a foreign bundle's transaction was not refused")
            return
        }
    }

    @Test func rogueAndMalformedResponsesReturnNoData() async throws {
        let rogue = Responses(pki: try TestPKI())
        let body = try rogue.status()
        let transport = ScriptedTransport(clock: clock) { _, index in
            index == 0 ? ScriptedTransport.json(200, body) : HTTPResponse(status: 200, body: Data("{\"data\": 7}".utf8))
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let first = await client.subscriptionStatuses(for: "1")
        guard case .verificationFailed(.untrustedChain, let payload) = first, !payload.isEmpty else { Issue.record("\(first)"); return }
        let second = await client.subscriptionStatuses(for: "1")
        guard case .malformedResponse = second else { Issue.record("\(second)"); return }
    }

    @Test func renewalInfoMustBelongToItsSubscription() async throws {
        var body = try responses.status()
        body.data?[0].lastTransactions?[0].signedRenewalInfo = try pki.sign(Payloads.renewal(originalTransactionId: "999"))
        let transport = ScriptedTransport(clock: clock) { [body] _, _ in ScriptedTransport.json(200, body) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        guard case .verificationFailed(.originalTransactionIdMismatch, _) = await client.subscriptionStatuses(for: "1") else {
            Issue.record("mismatched renewal info accepted")
            return
        }
    }

    @Test("one item failing verification leaves its healthy neighbour in the same answer usable (issue 18 item 10)")
    func aBadItemFailsOnlyItself() async throws {
        var body = try responses.status(originalTransactionId: "2000000000000001")
        let rogue = try Responses(pki: TestPKI()).status(originalTransactionId: "2000000000000002")
        body.data?[0].lastTransactions?.append(contentsOf: rogue.data?[0].lastTransactions ?? [])
        let transport = ScriptedTransport(clock: clock) { [body] _, _ in ScriptedTransport.json(200, body) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let outcome = await client.subscriptionStatuses(for: "2000000000000001")
        let value = try #require(outcome.value, "\(outcome)")
        #expect(value.subscriptions.map(\.transaction.originalTransactionId) == ["2000000000000001"])
        #expect(value.rejected.map(\.originalTransactionId) == ["2000000000000002"])
        #expect(value.rejected.first?.failure == .untrustedChain)
        #expect(value.rejected.first?.payload.isEmpty == false)

        // An answer with nothing usable still fails as a whole.
        let onlyRogue = ScriptedTransport(clock: clock) { [rogue] _, _ in ScriptedTransport.json(200, rogue) }
        let alone = TestConfiguration.client(pki: pki, transport: onlyRogue, clock: clock)
        guard case .verificationFailed(.untrustedChain, _) = await alone.subscriptionStatuses(for: "2000000000000002") else {
            Issue.record("a rogue-only answer was accepted")
            return
        }
    }

    @Test func unauthorizedMintsOneFreshTokenThenGivesUp() async throws {
        let body = try responses.status()
        let once = ScriptedTransport(clock: clock) { _, index in index == 0 ? HTTPResponse(status: 401) : ScriptedTransport.json(200, body) }
        let client = TestConfiguration.client(pki: pki, transport: once, clock: clock)
        #expect(await client.subscriptionStatuses(for: "1").value != nil)
        let tokens = once.requests.map { $0.header("Authorization") }
        #expect(tokens.count == 2 && tokens[0] != tokens[1])
        #expect(client.tokens.mintedCount == 2)

        let always = ScriptedTransport(clock: clock) { _, _ in HTTPResponse(status: 401) }
        let rejected = TestConfiguration.client(pki: pki, transport: always, clock: clock)
        let outcome = await rejected.subscriptionStatuses(for: "1")
        guard case .unauthorized = outcome else { Issue.record("\(outcome)"); return }
        #expect(always.requests.count == 2)
        #expect(outcome.description == "Apple rejected the API key: check issuer id, key id and key")
    }

    @Test func tokenIsReusedAcrossCalls() async throws {
        let body = try responses.status()
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.json(200, body) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        for _ in 0..<5 { _ = await client.subscriptionStatuses(for: "1") }
        #expect(Set(transport.requests.map { $0.header("Authorization") }).count == 1)
        #expect(client.tokens.mintedCount == 1)
    }

    @Test func rateLimitedCallWaitsUntilRetryAfter() async throws {
        let body = try responses.status()
        let retryAt = clock.now().addingTimeInterval(7.25)
        let retryAfter = String(Int64(retryAt.timeIntervalSince1970 * 1000))
        let transport = ScriptedTransport(clock: clock) { _, index in
            index == 0 ? ScriptedTransport.error(429, 4_290_000, headers: ["Retry-After": retryAfter]) : ScriptedTransport.json(200, body)
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        #expect(await client.subscriptionStatuses(for: "1").value != nil)
        let times = transport.sendTimes
        #expect(times.count == 2)
        #expect(times[1] >= retryAt)
        #expect(times[1].timeIntervalSince(retryAt) < 0.1)
    }

    @Test func retryAfterBeyondTheWaitBudgetIsCappedAndReturned() async throws {
        let retryAt = clock.now().addingTimeInterval(3600)
        let retryAfter = String(Int64(retryAt.timeIntervalSince1970 * 1000))
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(429, 4_290_000, headers: ["Retry-After": retryAfter]) }
        let logs = CapturedLogs()
        let client = AppStoreServerAPIClient(
            configuration: TestConfiguration.make(pki: pki), transport: transport, clock: clock, random: { 0.5 },
            logger: Logger(label: "test") { _ in CapturingLogHandler(logs) })
        let start = clock.now()
        let outcome = await client.subscriptionStatuses(for: "1")
        guard case .rateLimited(let until) = outcome else { Issue.record("\(outcome)"); return }
        // The pause is capped at APPSTORE_MAX_RETRY_WAIT (60 s by default), not the server's hour.
        #expect(abs(until.timeIntervalSince(start) - 60) < 0.001)
        #expect(transport.requests.count == 1)
        #expect(clock.totalSlept == 0)
        // Other tasks wait out the capped pause only, then ask again.
        let next = await client.subscriptionStatuses(for: "2")
        guard case .rateLimited = next else { Issue.record("\(next)"); return }
        #expect(transport.requests.count == 2)
        #expect(clock.totalSlept <= 60.001, "slept \(clock.totalSlept) s")
        // Another endpoint is not paused.
        _ = await client.transactionInfo(for: "2")
        #expect(transport.requests.count == 3)
        // Said loudly, once: one warning naming the server's value and the cap.
        let warnings = logs.lines.filter { $0.level == .warning && $0.message.contains("APPSTORE_MAX_RETRY_WAIT") }
        #expect(warnings.count == 1, "\(logs.lines)")
        #expect(warnings.first?.message.contains(retryAfter) == true && warnings.first?.message.contains("60 s") == true,
                "\(warnings.first?.message ?? "none")")
    }

    @Test func backoffIsExponentialWithFullJitterAndBounded() async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(500, 5_000_001) }
        let retry = RetryPolicy(maxAttempts: 5, baseDelay: 1, maxDelay: 5, maxTotalWait: 100)
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock, unit: 0.999_999, retry: retry)
        let outcome = await client.subscriptionStatuses(for: "1")
        guard case .retryable(.http(500, .generalInternalRetryable?)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(transport.requests.count == 5)
        let backoff = clock.sleeps.filter { $0 > 0.5 }
        #expect(backoff.count == 4)
        for (got, ceiling) in zip(backoff, [1.0, 2, 4, 5]) { #expect(abs(got - ceiling) < 0.001) }

        // Jitter draws from [0, ceiling]: with 0 there is no wait at all.
        let zeroClock = TestClock()
        let zero = TestConfiguration.client(pki: pki, transport: transport, clock: zeroClock, unit: 0, retry: retry)
        _ = await zero.subscriptionStatuses(for: "1")
        #expect(zeroClock.sleeps.allSatisfy { $0 < 0.5 })
    }

    @Test func totalWaitIsBounded() async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in throw HTTPTransportError.timeout }
        let retry = RetryPolicy(maxAttempts: 50, baseDelay: 1, maxDelay: 10, maxTotalWait: 12)
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock, unit: 0.999, retry: retry)
        let outcome = await client.transactionInfo(for: "1")
        guard case .retryable(.timeout) = outcome else { Issue.record("\(outcome)"); return }
        #expect(clock.totalSlept <= 12)
        #expect(transport.requests.count < 50)
    }

    @Test("a 503 whose retry would wait past the budget for the limiter's own slot returns the 503, not \"rate limited\" (Apple said no 429)")
    func failureThenASlotPastTheBudgetIsTheFailure() async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(503, 5_000_001) }
        // One status call every 4 s; the retry's wait (0.5 s) leaves 1.5 s of a 2 s budget.
        var limits = AppStoreRateLimits.apple
        limits.production[.subscriptionStatuses] = 0.25
        let retry = RetryPolicy(maxAttempts: 5, baseDelay: 1, maxDelay: 5, maxTotalWait: 2)
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock, unit: 0.5, retry: retry, limits: limits)
        let outcome = await client.subscriptionStatuses(for: "1")
        guard case .retryable(.http(503, _)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(transport.requests.count == 1)

        // Without a failure before, a slot past the budget is the limiter's pause: rate limited.
        let first = await client.subscriptionStatuses(for: "2")
        guard case .rateLimited = first else { Issue.record("\(first)"); return }
        #expect(transport.requests.count == 1)
    }

    @Test(arguments: [4_040_002, 4_040_004, 4_040_006] as [Int64])
    func applesRetryable404sAreRetried(code: Int64) async throws {
        let body = try responses.status()
        let transport = ScriptedTransport(clock: clock) { _, index in index < 2 ? ScriptedTransport.error(404, code) : ScriptedTransport.json(200, body) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        #expect(await client.subscriptionStatuses(for: "1").value != nil)
        #expect(transport.requests.count == 3)
    }

    @Test func errorCodesMapToOutcomes() async throws {
        let cases: [(HTTPResponse, String)] = [
            (ScriptedTransport.error(404, 4_040_005), "notFound(4040005)"),
            (ScriptedTransport.error(400, 4_000_006), "badRequest(4000006)"),
            (ScriptedTransport.error(400, 4_000_999), "badRequest(4000999)"),
            (HTTPResponse(status: 404), "notFound(nil)"),
            (ScriptedTransport.error(403, 4_030_000), "badRequest(4030000)"),
        ]
        for (response, expected) in cases {
            let transport = ScriptedTransport(clock: clock) { _, _ in response }
            let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
            let got: String
            switch await client.subscriptionStatuses(for: "1") {
            case .notFound(let c): got = "notFound(\(c.map { String($0.rawValue) } ?? "nil"))"
            case .badRequest(let c): got = "badRequest(\(c.map { String($0.rawValue) } ?? "nil"))"
            case let other: got = "\(other)"
            }
            #expect(got == expected)
            #expect(transport.requests.count == 1)
        }
    }

    @Test func transactionUnknownInProductionIsTriedInSandboxOnce() async throws {
        let sandboxBody = try responses.status(environment: .sandbox)
        let transport = ScriptedTransport(clock: clock) { request, _ in
            request.url.host == "prod.test" ? ScriptedTransport.error(404, 4_040_010) : ScriptedTransport.json(200, sandboxBody)
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let (outcome, environment) = await client.withEnvironmentFallback { env in
            await client.subscriptionStatuses(for: "1", environment: env)
        }
        #expect(environment == .sandbox)
        #expect(outcome.value?.environment == .sandbox)
        #expect(outcome.value?.subscriptions.first?.transaction.environment == .sandbox)
        #expect(transport.requests.map { $0.url.host } == ["prod.test", "sandbox.test"])

        let nowhere = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(404, 4_040_010) }
        let client2 = TestConfiguration.client(pki: pki, transport: nowhere, clock: clock)
        let (missing, env2) = await client2.withEnvironmentFallback { await client2.transactionInfo(for: "1", environment: $0) }
        #expect(missing.isTransactionUnknownInEnvironment && env2 == .sandbox)
        #expect(nowhere.requests.count == 2)

        let other404 = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(404, 4_040_001) }
        let client3 = TestConfiguration.client(pki: pki, transport: other404, clock: clock)
        let (_, env3) = await client3.withEnvironmentFallback { await client3.transactionInfo(for: "1", environment: $0) }
        #expect(env3 == .production && other404.requests.count == 1)
    }

    @Test func sandboxPayloadsMustSaySandbox() async throws {
        let prodBody = try responses.status(environment: .production)
        let transport = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.json(200, prodBody) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        guard case .verificationFailed(.environmentMismatch, _) = await client.subscriptionStatuses(for: "1", environment: .sandbox) else {
            Issue.record("production payload accepted from the sandbox host")
            return
        }
    }

    @Test func identifiersArePercentEncoded() {
        let url = AppStoreServerAPIClient.url(URL(string: "http://127.0.0.1:8080/")!, path: "/inApps/v1/transactions/\(AppStoreServerAPIClient.escape("a/b?c"))", query: [("revision", "x+y=z&")])
        #expect(url.absoluteString == "http://127.0.0.1:8080/inApps/v1/transactions/a%2Fb%3Fc?revision=x%2By%3Dz%26")
    }

    @Test func retryAfterParsing() {
        let now = Date(timeIntervalSince1970: 1_717_200_000)
        #expect(AppStoreServerAPIClient.parseRetryAfter("1717200005000", now: now) == Date(timeIntervalSince1970: 1_717_200_005))
        #expect(AppStoreServerAPIClient.parseRetryAfter("30", now: now) == now.addingTimeInterval(30))
        #expect(AppStoreServerAPIClient.parseRetryAfter("soon", now: now) == nil)
        #expect(AppStoreServerAPIClient.parseRetryAfter(nil, now: now) == nil)
    }
}
