@testable import AppStoreServerAPI
import AppStoreModels
import Foundation
import Testing

/// Send Consumption Information: the PUT and its body, Apple's errors typed, retries that never
/// start at or after the request's deadline.
@Suite("Client: Send Consumption Information")
struct ConsumptionClientTests {
    let pki: TestPKI
    let clock = TestClock()
    let body = ConsumptionRequest(customerConsented: true, sampleContentProvided: true, deliveryStatus: .delivered, refundPreference: .decline)

    init() throws { pki = try TestPKI() }

    @Test("a PUT to the v2 path with the JSON body, sorted keys, bearer token; 202 is success")
    func putAndAccepted() async throws {
        let transport = ScriptedTransport(clock: clock) { _, _ in HTTPResponse(status: 202, headers: [:], body: Data()) }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let outcome = await client.sendConsumptionInformation(transactionId: "2000000000000042", body, timeLeft: 3600)
        #expect(outcome.value == ConsumptionAccepted(status: 202))
        let request = try #require(transport.requests.first)
        #expect(request.method == "PUT")
        #expect(request.url.absoluteString == "https://prod.test/inApps/v2/transactions/consumption/2000000000000042")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Authorization")?.hasPrefix("Bearer ") == true)
        #expect(String(decoding: request.body ?? Data(), as: UTF8.self)
                == #"{"customerConsented":true,"deliveryStatus":"DELIVERED","refundPreference":"DECLINE","sampleContentProvided":true}"#)
    }

    @Test("Apple's 400 InvalidCustomerConsented and 404 TransactionIdNotFound come back typed, not retried")
    func typedErrors() async throws {
        let transport = ScriptedTransport(clock: clock) { request, _ in
            request.url.path.hasSuffix("/404") ? ScriptedTransport.error(404, 4_040_010) : ScriptedTransport.error(400, 4_000_035)
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let refused = await client.sendConsumptionInformation(transactionId: "1", body, timeLeft: 3600)
        guard case .badRequest(let code) = refused else { Issue.record("\(refused)"); return }
        #expect(code == .invalidCustomerConsented && code?.name == "InvalidCustomerConsented")
        let unknown = await client.sendConsumptionInformation(transactionId: "404", body, timeLeft: 3600)
        #expect(unknown.isTransactionUnknownInEnvironment)
        #expect(transport.requests.count == 2)
    }

    @Test("a 503 is retried before the deadline; a retry that would start at or after it is not made")
    func retriesStopAtTheDeadline() async throws {
        let transport = ScriptedTransport(clock: clock) { _, index in
            index == 0 ? ScriptedTransport.error(503, 5_000_001) : HTTPResponse(status: 202, headers: [:], body: Data())
        }
        let client = TestConfiguration.client(pki: pki, transport: transport, clock: clock)
        let ok = await client.sendConsumptionInformation(transactionId: "1", body, timeLeft: 3600)
        #expect(ok.value != nil && transport.requests.count == 2)

        let failing = ScriptedTransport(clock: clock) { _, _ in ScriptedTransport.error(503, 5_000_001) }
        let late = TestConfiguration.client(pki: pki, transport: failing, clock: clock)
        let deadline = clock.now() + 0.2
        let outcome = await late.sendConsumptionInformation(transactionId: "1", body, timeLeft: 0.2)
        guard case .retryable = outcome else { Issue.record("\(outcome)"); return }
        #expect(failing.requests.count >= 1)
        #expect(failing.sendTimes.allSatisfy { $0 < deadline })
        // Past its deadline nothing is sent at all.
        let none = ScriptedTransport(clock: clock) { _, _ in HTTPResponse(status: 202, headers: [:], body: Data()) }
        let after = await TestConfiguration.client(pki: pki, transport: none, clock: clock)
            .sendConsumptionInformation(transactionId: "1", body, timeLeft: -1)
        #expect(after.value == nil && none.requests.isEmpty)
    }
}
