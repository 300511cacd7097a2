import Foundation
import Testing

/// churnwatch against an App Store Server API written independently of the project's simulator
/// (ops/independent-appstore/server.py, from Apple's fact sheet only), night after night, compared
/// with that server's ground truth by ops/independent-appstore/check.py. The check's output is
/// forwarded; any mismatch fails the test.
@Suite("churnwatch against the independent App Store server", .serialized)
struct IndependentServerTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// CHURNWATCH_PYTHON (exported by ops/test: a python3 with Apple's library and thus
    /// `cryptography`), else python3.
    static var python: String {
        let configured = ProcessInfo.processInfo.environment["CHURNWATCH_PYTHON"] ?? ""
        return configured.isEmpty ? "python3" : configured
    }

    /// Runs a process to its end on a thread of its own: the check takes ~25 s, and a blocked
    /// cooperative thread (there are only as many as cores) would starve other suites' async tests.
    static func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await OwnThread.run { try runBlocking(arguments) }
    }

    private static func runBlocking(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.currentDirectoryURL = repositoryRoot
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try CLIRunner.spawn(process)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        return (ChildExit.status(of: process), String(decoding: data, as: UTF8.self))
    }

    @Test("eight nights, two apps in one database (the second's key refused on night 4): segments, auto-renew flips, live win-back entries and runs of each app match the truth")
    func eightNights() async throws {
        let probe = try await Self.run([Self.python, "-c", "import cryptography"])
        guard probe.status == 0 else {
            Issue.record("""
                \(Self.python) cannot import `cryptography`, which the independent server needs: \
                run through ops/test (it exports CHURNWATCH_PYTHON) or `pip install cryptography`. \
                \(probe.output)
                """)
            return
        }
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let check = Self.repositoryRoot.appendingPathComponent("ops/independent-appstore/check.py").path
        let result = try await Self.run([Self.python, check, "--churnwatch", CLIRunner.binary.path,
                                   "--database-url", db.connectionURL, "--nights", "8",
                                   // A second app beside the first (issue 26): its own world, budget and history; Apple
                                   // refuses its key for one night, which must not stop the first.
                                   "--apps", "2", "--refuse-app", "2",
                                   // Nights long past: nothing churnwatch does may depend on the machine's clock.
                                   "--first-night", "2026-11-01T02:00:00Z"])
        print(result.output)
        #expect(result.status == 0, "check.py exited \(result.status):\n\(result.output)")
    }
}
