import Foundation
import Postgres
import Testing

/// The cancel page as an outside party meets it: requests signed by a chain churnwatch never saw
/// before its root was configured (ops/crosscheck_retention.py, with Apple's Python library),
/// answers decoded by Apple's own `RealtimeResponseBody`, offer signatures verified with the
/// In-App Purchase key.
@Suite("the cancel page against Apple's Python library and a chain of its own", .serialized)
struct RetentionInteropTests {
    typealias E2E = NightlyRunEndToEndTests

    struct Result: Decodable {
        var answered: Int
        var kinds: [String: Int]
        var retries_same: Int
        var stale_refused: Int
        var failures: [String]
    }

    @Test("requests signed by another chain (its root configured) are verified and answered: one member, a UUID message, an offer signed with the In-App Purchase key for the request's product; a retry gets the same answer; a request signed 10 minutes ago is refused")
    func pythonAndAnotherChain() async throws {
        let world = try await E2E.World.make(subscribers: 60, seed: 29)
        defer { world.close() }
        let night = try await world.night(E2E.start, extra: ["--notifications", "off"])
        #expect(night.status == 0, "\(night.stderr.suffix(400))")
        try await ServeRetentionCLITests.upload(ServeRetentionCLITests.m1, world.env)
        let rule = try await CLIRunner.run(["messages", "rules", "set", "--name", "offer", "--kind", "promotional_offer",
                                            "--message", ServeRetentionCLITests.m1, "--offer-id", "save50"], environment: world.env)
        #expect(rule.status == 0, "\(rule.stderr)")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-xr-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: dir) }
        let script = IndependentServerTests.repositoryRoot.appendingPathComponent("ops/crosscheck_retention.py").path
        // The script's path is absolute: the child needs no working directory of its own.
        let pki = try await AppleClientInteropTests.runPython([script, "pki", dir.path])
        try #require(pki.status == 0, "\(pki.output)")
        var env = world.env
        env["APPSTORE_ROOT_CERTS"] = dir.appendingPathComponent("root.pem").path
        let server = try await ServeCLITests.Server.start(env)
        defer { server.kill() }
        let subscriptions = try world.connect().query("""
            SELECT original_transaction_id || ':' || product_id AS s FROM churnwatch.subscriptions
            WHERE product_id IS NOT NULL AND environment = 'Production' ORDER BY 1 LIMIT 12
            """).map { try $0.decode(String.self, "s") }
        #expect(subscriptions.count == 12)
        let check = try await AppleClientInteropTests.runPython(
            [script, "check", dir.path, "http://127.0.0.1:\(server.port)\(ServeRetentionCLITests.path)",
             env["APPSTORE_APP_APPLE_ID"] ?? "", env["APPSTORE_BUNDLE_ID"] ?? "", env["APPSTORE_PRIVATE_KEY_PATH"] ?? ""] + subscriptions)
        let line = check.output.split(separator: "\n").last.map(String.init) ?? ""
        let result = try #require(try? JSONDecoder().decode(Result.self, from: Data(line.utf8)), "\(check.output.suffix(1500))")
        print("cancel page against Apple's Python library: \(line)")
        #expect(result.failures.isEmpty, "\(result.failures)")
        #expect(result.answered == subscriptions.count && result.kinds == ["promotionalOffer": subscriptions.count])
        #expect(result.retries_same == subscriptions.count && result.stale_refused == 1)
        #expect(try await server.stop().status == 0)
    }
}
