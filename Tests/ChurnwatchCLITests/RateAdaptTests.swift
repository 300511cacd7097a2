import Foundation
import Testing

/// A server that allows less than the configured rate (Apple lowering an app's limit) is
/// followed, not given up on (issue 29).
@Suite("a lower rate limit than configured", .serialized)
struct RateAdaptTests {
    typealias E2E = NightlyRunEndToEndTests

    @Test("the server allows 20/s per endpoint, churnwatch is configured at 50/s: the run settles near 20/s and finishes (exit 0), every subscription polled, few calls refused")
    func followsALowerLimit() async throws {
        let world = try await E2E.World.make(subscribers: 400, seed: 17, simFlags: ["--rate", "20", "--burst", "20"])
        defer { world.close() }
        try world.sim.setClock(E2E.iso(E2E.start))
        let r = try await CLIRunner.run(["run", "--as-of", E2E.iso(E2E.start), "--notifications", "off",
                                         "--status-rate", "50", "--history-rate", "50"], environment: world.env)
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(600))")
        #expect(r.stdout.contains("400 due, 400 polled, 0 failed"), "\(r.stdout)")
        let stats = try JSONSerialization.jsonObject(with: try world.sim.request("GET", "/_sim/stats")) as? [String: Any]
        let requests = stats?["requests"] as? [String: [String: Int]] ?? [:]
        let accepted = (requests["subscriptions"]?["200"] ?? 0) + (requests["history"]?["200"] ?? 0)
        let refused = stats?["rate_limited"] as? Int ?? -1
        print("rate adapt: \(accepted) calls accepted, \(refused) refused (429)")
        // Before the shared rate followed the server, the first 429s slowed it to a crawl.
        #expect(refused >= 0 && refused * 5 < accepted, "\(refused) refused for \(accepted) accepted")
    }

    @Test("a server that keeps refusing past the wait budget: exit 75, resumable, in one line with the rate the run had come down to")
    func givingUpSaysTheRateItReached() async throws {
        // One call every 20 s allowed; each call waits for Apple at most 1 s (APPSTORE_MAX_RETRY_WAIT).
        let world = try await E2E.World.make(subscribers: 40, seed: 17, simFlags: ["--rate", "0.05", "--burst", "1"])
        defer { world.close() }
        try world.sim.setClock(E2E.iso(E2E.start))
        var env = world.env
        env["APPSTORE_MAX_RETRY_WAIT"] = "1"
        let r = try await CLIRunner.run(["run", "--as-of", E2E.iso(E2E.start), "--notifications", "off"], environment: env)
        #expect(r.status == 75, "\(r.stdout) \(r.stderr.suffix(600))")
        let last = r.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("churnwatch: resumable: run ") && last.contains("Apple unavailable: rate limited"), "\(last)")
        #expect(last.range(of: #"the status rate had come down to [0-9.]+/s\)$"#, options: .regularExpression) != nil, "\(last)")
    }
}
