@testable import AppStoreServerAPI
import Foundation
import Logging
import Testing

@Suite("Legacy verifyReceipt status handling")
struct VerifyReceiptTests {
    let clock = TestClock()

    func client(_ transport: ScriptedTransport, environment: AppStoreEnvironment = .production, baseURLs: Bool = true) throws -> AppStoreServerAPIClient {
        var configuration = TestConfiguration.make(pki: try TestPKI(), environment: environment)
        if !baseURLs {
            configuration.productionBaseURL = nil
            configuration.sandboxBaseURL = nil
        }
        return AppStoreServerAPIClient(configuration: configuration, transport: transport, clock: clock, random: { 0.5 }, logger: .silent)
    }

    static func body(_ json: String) -> HTTPResponse { HTTPResponse(status: 200, body: Data(json.utf8)) }

    @Test func sandboxReceiptGoesToSandboxOn21007() async throws {
        let transport = ScriptedTransport(clock: clock) { request, _ in
            request.url.host == "buy.itunes.apple.com"
                ? Self.body(#"{"status":21007}"#)
                : Self.body(#"{"status":0,"environment":"Sandbox","latest_receipt":"NEW"}"#)
        }
        let outcome = try await client(transport, baseURLs: false).verifyReceipt("OLD")
        let result = try #require(outcome.value)
        #expect(result.environment == .sandbox && result.latestReceipt == "NEW")
        #expect(transport.requests.map(\.url.absoluteString) == [
            "https://buy.itunes.apple.com/verifyReceipt", "https://sandbox.itunes.apple.com/verifyReceipt",
        ])
        #expect(transport.requests.allSatisfy { $0.method == "POST" && $0.header("Authorization") == nil })
    }

    @Test func overriddenBaseURLsCarryVerifyReceipt() async throws {
        let transport = ScriptedTransport(clock: clock) { _, index in Self.body(index == 0 ? #"{"status":21008}"# : #"{"status":0}"#) }
        let outcome = try await client(transport, environment: .sandbox).verifyReceipt("R")
        #expect(outcome.value?.environment == .production)
        #expect(outcome.value?.latestReceipt == "R")
        #expect(transport.requests.map(\.url.absoluteString) == ["https://sandbox.test/verifyReceipt", "https://prod.test/verifyReceipt"])
    }

    @Test(arguments: [
        (#"{"status":21002}"#, true), (#"{"status":21005}"#, true), (#"{"status":21009}"#, true),
        (#"{"status":21100,"is-retryable":true}"#, true), (#"{"status":21150,"is_retryable":1}"#, true),
        (#"{"status":21199,"is-retryable":false}"#, false), (#"{"status":21100}"#, false),
    ])
    func retryableStatuses(json: String, retryable: Bool) async throws {
        let transport = ScriptedTransport(clock: clock) { _, index in Self.body(index == 0 ? json : #"{"status":0,"latest_receipt":"N"}"#) }
        let outcome = try await client(transport).verifyReceipt("R")
        if retryable {
            #expect(outcome.value?.latestReceipt == "N", "\(outcome)")
            #expect(transport.requests.count == 2)
        } else {
            guard case .badRequest(let code) = outcome else { Issue.record("\(outcome)"); return }
            #expect(code?.rawValue ?? 0 >= 21_100)
            #expect(transport.requests.count == 1)
        }
    }

    @Test func retryableStatusThatPersistsIsReported() async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in Self.body(#"{"status":21005}"#) }
        let outcome = try await client(transport).verifyReceipt("R")
        guard case .retryable(.http(200, let code)) = outcome else { Issue.record("\(outcome)"); return }
        #expect(code == AppStoreErrorCode(21_005))
        #expect(transport.requests.count == RetryPolicy().maxAttempts)
    }

    @Test(arguments: [21_000, 21_003, 21_004, 21_010])
    func permanentStatuses(status: Int) async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in Self.body(#"{"status":\#(status)}"#) }
        let outcome = try await client(transport).verifyReceipt("R")
        guard case .badRequest(let code) = outcome else { Issue.record("\(outcome)"); return }
        #expect(code?.rawValue == Int64(status))
        #expect(transport.requests.count == 1)
    }

    @Test func expiredIOS6ReceiptIsStillAnAnswer() async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in Self.body(#"{"status":21006,"latest_receipt":"X"}"#) }
        #expect(try await client(transport).verifyReceipt("R").value?.response.status == 21_006)
    }
}
