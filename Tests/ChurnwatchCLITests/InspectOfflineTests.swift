import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// `churnwatch inspect JWS|FILE|-` verifies with the trusted roots, the app and the environment
/// alone (issue 19, item 1): an operator checking a payload needs no In-App Purchase key on that
/// machine. Only `inspect --otid` talks to Apple and needs it.
@Suite("inspect without the In-App Purchase key (the binary)")
struct InspectOfflineTests {
    @Test("a payload the simulator signed verifies with only roots, bundle id, app Apple id and environment")
    func verifiesWithoutTheKey() async throws {
        let sim = try await SimulatorProcess.start(subscribers: 30, seed: 19, start: "2026-11-01T00:00:00Z")
        defer { sim.stop() }
        let jws = try await OwnThread.run { try sim.signedTransactionOfAProductionSubscriber() }

        var offline: [String: String] = [:]
        for name in ["APPSTORE_ROOT_CERTS", "APPSTORE_BUNDLE_ID", "APPSTORE_APP_APPLE_ID", "APPSTORE_ENVIRONMENT"] {
            offline[name] = sim.environment[name]
        }
        #expect(offline["APPSTORE_ROOT_CERTS"] != nil && offline["APPSTORE_ENVIRONMENT"] == "Production")
        let inline = try await CLIRunner.run(["inspect", jws], environment: offline)
        #expect(inline.status == 0, "\(inline.stderr)")
        #expect(inline.stderr.contains("verdict: verified (1 signed payload)"), "\(inline.stderr)")
        #expect(inline.stdout.contains("\"verified\" : true") || inline.stdout.contains("\"verified\":true"), "\(inline.stdout.prefix(400))")

        let file = sim.directory.appendingPathComponent("payload.jws")
        try Data(jws.utf8).write(to: file)
        let fromFile = try await CLIRunner.run(["inspect", file.path], environment: offline)
        #expect(fromFile.status == 0, "\(fromFile.stderr)")

        // Another app's roots: still verified offline, and rejected.
        var wrongApp = offline
        wrongApp["APPSTORE_BUNDLE_ID"] = "com.example.other"
        let foreign = try await CLIRunner.run(["inspect", jws], environment: wrongApp)
        #expect(foreign.status == 1, "\(foreign.stderr)")

        // Asking Apple needs the key: one line naming the first missing setting, exit 78.
        let ask = try await CLIRunner.run(["inspect", "--otid", "200000000001000"], environment: offline)
        #expect(ask.status == 78, "\(ask.stderr)")
        #expect(ask.stderr.contains("APPSTORE_ISSUER_ID"), "\(ask.stderr)")

        // Verifying still needs the roots.
        var noRoots = offline
        noRoots["APPSTORE_ROOT_CERTS"] = nil
        let unrooted = try await CLIRunner.run(["inspect", jws], environment: noRoots)
        #expect(unrooted.status == 78 && unrooted.stderr.contains("APPSTORE_ROOT_CERTS"), "\(unrooted.stderr)")
    }
}

extension SimulatorProcess {
    /// A bearer JWT minted by `appstore-sim token` for the simulator's API key.
    func bearerToken() throws -> String {
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = ["token", "--pki-dir", directory.appendingPathComponent("pki").path]
        let out = Pipe()
        process.standardOutput = out
        try CLIRunner.spawn(process)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let status = ChildExit.status(of: process)
        guard status == 0 else { throw CLITestError("appstore-sim token exited \(status)") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// GET `path` on `base` with a bearer token; the body of a 200 answer. Blocking: call it
    /// inside `OwnThread.run`.
    func authorizedGet(_ path: String, base: String? = nil) throws -> Data {
        var req = URLRequest(url: URL(string: (base ?? productionURL) + path)!)
        req.setValue("Bearer \(try bearerToken())", forHTTPHeaderField: "Authorization")
        req.timeoutInterval = 60
        final class Box: @unchecked Sendable {
            let done = DispatchSemaphore(value: 0)
            var result: (Data?, Int?, (any Error)?) = (nil, nil, nil)
        }
        let box = Box()
        URLSession.shared.dataTask(with: req) { data, response, error in
            box.result = (data, (response as? HTTPURLResponse)?.statusCode, error)
            box.done.signal()
        }.resume()
        box.done.wait()
        let result = box.result
        if let error = result.2 { throw CLITestError("simulator \(path): \(error)") }
        guard result.1 == 200, let data = result.0 else { throw CLITestError("simulator \(path): HTTP \(result.1 ?? 0)") }
        return data
    }

    /// The signed latest transaction (`signedTransactionInfo`) of the first Production
    /// subscriber in the simulator's truth, as Get All Subscription Statuses serves it.
    func signedTransactionOfAProductionSubscriber() throws -> String {
        let otid = try #require(try truth(at: "2026-11-01T00:00:00Z").values
            .filter { $0.environment == "Production" }.map(\.original_transaction_id).min())
        let body = try authorizedGet("/inApps/v1/subscriptions/\(otid)")
        let json = try JSONSerialization.jsonObject(with: body) as? [String: Any]
        let group = (json?["data"] as? [[String: Any]])?.first
        let item = (group?["lastTransactions"] as? [[String: Any]])?.first
        return try #require(item?["signedTransactionInfo"] as? String)
    }
}
