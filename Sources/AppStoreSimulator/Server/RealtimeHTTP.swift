import AppStoreModels
import AsyncHTTPClient
import Foundation
import NIOCore

/// Apple's real-time request of the Retention Messaging API over real HTTP: a POST of
/// `{"signedPayload": JWS}` to the Get Retention Message URL, one attempt, with a deadline.
enum RealtimeHTTP {
    /// What one attempt got.
    struct Answer: Sendable {
        /// The HTTP status; nil when no answer came (see ``failure``).
        var status: Int?
        /// Real time from the start of the request to the end of the answer (or the failure).
        var latencyMs: Int64
        var body: [UInt8]
        /// Apple's `SendAttemptResult` when no answer came (`TIMED_OUT`, `NO_RESPONSE`, ...).
        var failure: String?
    }

    /// A client whose pool holds `connections` per host (the default 8 would queue requests
    /// and count the wait as the server's time).
    static func client(connections: Int) -> HTTPClient {
        var config = HTTPClient.Configuration(timeout: .init(connect: .seconds(2)))
        config.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(8, connections))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: config)
    }

    static func post(_ client: HTTPClient, url: String, signedPayload: String, timeoutMs: Int64) async -> Answer {
        let started = ContinuousClock.now
        func elapsed() -> Int64 {
            let d = started.duration(to: .now).components
            return d.seconds * 1000 + d.attoseconds / 1_000_000_000_000_000
        }
        do {
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: "{\"signedPayload\":\"\(signedPayload)\"}"))
            let deadline = NIODeadline.now() + .milliseconds(timeoutMs)
            let response = try await client.execute(request, deadline: deadline)
            let body = try await response.body.collect(upTo: 1 << 20)
            return Answer(status: Int(response.status.code), latencyMs: elapsed(), body: Array(buffer: body), failure: nil)
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
            return Answer(status: nil, latencyMs: elapsed(), body: [], failure: "TIMED_OUT")
        } catch let error as HTTPClientError where error == .remoteConnectionClosed {
            return Answer(status: nil, latencyMs: elapsed(), body: [], failure: "PREMATURE_CLOSE")
        } catch {
            let refused = "\(error)".lowercased().contains("refused")
            return Answer(status: nil, latencyMs: elapsed(), body: [], failure: refused ? "NO_RESPONSE" : "SOCKET_ISSUE")
        }
    }

    /// The answer's body when it is a valid `RealtimeResponseBody` (exactly one member, with a
    /// message identifier), else nil.
    static func validBody(_ bytes: [UInt8]) -> RealtimeResponseBody? {
        guard let body = try? JSONDecoder().decode(RealtimeResponseBody.self, from: Data(bytes)), body.isValid else { return nil }
        return body
    }
}

/// A performance test of the Sandbox Get Retention Message URL: `totalRequests` signed real-time
/// requests for one Sandbox subscription, at most `maxConcurrentRequests` in flight; each is a
/// SUCCESS when a 200 with a valid `RealtimeResponseBody` comes within `responseTimeThreshold`.
/// Requests not started within `totalDuration` are not sent (`OTHER`). The outcomes go to the
/// app's ``SimMessaging`` as they come, so the result is PENDING with `numPending` until the end.
struct PerformanceTestRunner: Sendable {
    let app: SimApp
    let requestId: String
    let subscriber: Int
    let config: RetentionWire.PerformanceTestConfig
    let target: String

    func run() async {
        let client = RealtimeHTTP.client(connections: config.maxConcurrentRequests)
        let started = ContinuousClock.now
        let limit = Duration.milliseconds(config.totalDuration)
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for _ in 0..<config.totalRequests {
                if running >= max(1, config.maxConcurrentRequests) {
                    await group.next()
                    running -= 1
                }
                guard started.duration(to: .now) < limit else {
                    app.messaging.record(requestId, .init(latencyMs: nil, result: "OTHER"))
                    continue
                }
                group.addTask { await one(client) }
                running += 1
            }
        }
        try? await client.shutdown()
        app.messaging.finish(requestId)
    }

    private func one(_ client: HTTPClient) async {
        let population = app.population
        let now = app.clock.now()
        let state = population.state(subscriber, at: now)
        let request = DecodedRealtimeRequestBody(
            originalTransactionId: population.originalTransactionId(subscriber), appAppleId: population.config.appAppleId,
            productId: population.catalog.products[state.latest.product].id, userLocale: "en-US",
            requestIdentifier: UUID().uuidString.lowercased(), signedDate: EpochMilliseconds(rawValue: now),
            rawEnvironment: SimEnvironment.sandbox.rawValue)
        guard let signed = try? app.identity.chain.sign(request) else {
            app.messaging.record(requestId, .init(latencyMs: nil, result: "OTHER"))
            return
        }
        let threshold = config.responseTimeThreshold
        // Waits past the threshold (up to twice it) to measure slow answers; they still fail.
        let answer = await RealtimeHTTP.post(client, url: target, signedPayload: signed, timeoutMs: max(2 * threshold, threshold + 500))
        let result: String
        if let failure = answer.failure {
            result = failure
        } else if answer.status != 200 {
            result = "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        } else if answer.latencyMs > threshold {
            result = "TIMED_OUT"
        } else if RealtimeHTTP.validBody(answer.body) == nil {
            result = "INVALID_RESPONSE"
        } else {
            result = "SUCCESS"
        }
        app.messaging.record(requestId, .init(latencyMs: answer.latencyMs, result: result))
    }
}
