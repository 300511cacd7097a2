import Foundation
import Testing

/// Apple's own Python client (app-store-server-library, installed by ops/test through
/// ops/lib.sh) against the simulator: the simulator must accept what Apple accepts (issue 19,
/// item 4). The library's tokens carry no `iat`; Apple takes them, so the simulator does too,
/// unless started with `--require-iat` (for tests of churnwatch's own tokens).
@Suite("Apple's Python client against the simulator (the binary)")
struct AppleClientInteropTests {
    struct Answer: Decodable {
        var statuses: Int?
        var history: Int?
        var pages: Int?
        var verified: Int?
        var error: Int?
    }

    static func runPython(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await OwnThread.run {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [IndependentServerTests.python] + arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try CLIRunner.spawn(process)
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            return (ChildExit.status(of: process), String(decoding: data, as: UTF8.self))
        }
    }

    static func call(_ sim: SimulatorProcess) async throws -> (status: Int32, answer: Answer?, output: String) {
        let otid = try #require(try await OwnThread.run { try sim.truth(at: "2026-11-01T00:00:00Z") }.values
            .filter { $0.environment == "Production" }.map(\.original_transaction_id).min())
        let script = IndependentServerTests.repositoryRoot.appendingPathComponent("ops/sim_python_client.py").path
        let result = try await runPython([script, sim.directory.appendingPathComponent("pki").path,
                                          String(sim.ports.production), otid])
        let line = result.output.split(separator: "\n").last.map(String.init) ?? ""
        return (result.status, try? JSONDecoder().decode(Answer.self, from: Data(line.utf8)), result.output)
    }

    @Test("Apple's client (tokens without iat) is served and verifies what it gets; --require-iat refuses it")
    func applesClientIsAccepted() async throws {
        let probe = try await Self.runPython(["-c", "import appstoreserverlibrary"])
        guard probe.status == 0 else {
            print("""
                AppleClientInteropTests: skipped: \(IndependentServerTests.python) cannot import appstoreserverlibrary \
                (Apple's app-store-server-library; ops/test installs it through ops/lib.sh ensure_python_crosscheck)
                """)
            return
        }
        let sim = try await SimulatorProcess.start(subscribers: 40, seed: 19, start: "2026-11-01T00:00:00Z")
        defer { sim.stop() }
        let accepted = try await Self.call(sim)
        #expect(accepted.status == 0, "\(accepted.output)")
        let answer = try #require(accepted.answer, "\(accepted.output)")
        #expect((answer.statuses ?? 0) >= 1 && (answer.history ?? 0) >= 1, "\(accepted.output)")
        #expect(answer.verified == (answer.statuses ?? 0) + (answer.history ?? 0), "\(accepted.output)")

        let strict = try await SimulatorProcess.start(subscribers: 40, seed: 19, start: "2026-11-01T00:00:00Z", extra: ["--require-iat"])
        defer { strict.stop() }
        let refused = try await Self.call(strict)
        #expect(refused.status == 1 && refused.answer?.error == 401, "\(refused.output)")
    }
}
