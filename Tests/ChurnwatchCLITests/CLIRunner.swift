import Foundation
import Postgres

/// Runs the churnwatch executable built next to this test bundle.
struct CLIRunner {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Ended by a signal it did not handle (kill -9), not by exiting; `status` is the signal.
        var bySignal = false
    }

    static var binary: URL {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        // The test binary lives in .build/<triple>/debug/churnwatchPackageTests.xctest (a file
        // on Linux); the executable sits in the same debug directory.
        for _ in 0..<3 {
            let candidate = dir.appendingPathComponent("churnwatch")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: "churnwatch")
    }

    static var migrationsDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql/migrations").path
    }

    /// What every child gets before the test's own environment: PATH, the migrations, and the
    /// change feed off. The suites written before the feed check the windows' polling (their
    /// call counts, their events per run); the feed's suites turn it on
    /// (`CHURNWATCH_NOTIFICATIONS=on`, the default outside the tests).
    static var baseEnvironment: [String: String] {
        ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
         "CHURNWATCH_MIGRATIONS_DIR": migrationsDirectory, "CHURNWATCH_NOTIFICATIONS": "off"]
    }

    /// Runs churnwatch with `arguments` and an environment that contains only `environment`
    /// plus PATH, so nothing from the developer's shell leaks in. The wait for the child runs on
    /// a thread of its own (`OwnThread.run`), never on one of Swift Testing's cooperative threads.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        try await OwnThread.run { try runBlocking(arguments, environment: environment) }
    }

    /// Starts `process` while no other test starts one. Foundation's `Process.run()` (Swift
    /// 6.3) lists /proc/self/fd to close every descriptor in the child, copying each directory
    /// entry at its declared size (swift-corelibs-foundation fixed it later: "readdir(3) returns
    /// dirent records sized to d_reclen ... a struct copy can read past the end of glibc's
    /// readdir buffer and SIGSEGV"). The buffer fills only when the process holds more than about
    /// 1,300 descriptors: the harness closes every pipe when its child is done (RunningCLI,
    /// SimulatorProcess, runBlocking), which keeps it far below that.
    static func spawn(_ process: Process) throws {
        spawnLock.lock()
        defer { spawnLock.unlock() }
        try process.run()
    }

    private static let spawnLock = NSLock()

    /// `run` for code that is already on a thread of its own (inside `OwnThread.run`).
    static func runBlocking(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        var env = baseEnvironment
        env.merge(environment) { _, new in new }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try CLIRunner.spawn(process)
        // Both pipes at once: a child that fills stderr (64 KiB) while stdout is read to its end
        // would block on the write, and both would wait for ever.
        let errBox = PipeData()
        let errDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            errBox.set(err.fileHandleForReading.readDataToEndOfFile())
            errDone.signal()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        errDone.wait()
        let errData = errBox.data
        // Closed now, not whenever Foundation lets the pipes go.
        try? out.fileHandleForReading.close()
        try? err.fileHandleForReading.close()
        return Result(status: ChildExit.status(of: process),
                      stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// What a reader thread read from a pipe.
private final class PipeData: @unchecked Sendable {
    private let lock = NSLock()
    private var value = Data()
    var data: Data { lock.withLock { value } }
    func set(_ d: Data) { lock.withLock { value = d } }
}

/// Blocking work (a child process, a pipe, a semaphore, a poll of database state) on a thread of
/// its own, so it never occupies one of Swift Testing's few cooperative threads: on two cores
/// there are two, and a test blocked on one starves every async test in the process. It also
/// keeps a wait and what must follow it (a kill, a stop) from being separated by a wait for a
/// cooperative thread.
enum OwnThread {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }
}

/// A fresh database on the test cluster, dropped by `drop()`.
struct ScratchDatabase {
    let name: String
    let server: String

    static func create() throws -> ScratchDatabase {
        let env = ProcessInfo.processInfo.environment
        guard let server = env["TEST_DATABASE_URL"] ?? env["DATABASE_URL"], !server.isEmpty else {
            throw CLITestError("DATABASE_URL is not set: run the tests with ops/test")
        }
        let name = "cw_cli_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try PostgresConnection(connectionString: server, logger: .postgres).execute("CREATE DATABASE \(identifier: String(name))")
        return ScratchDatabase(name: String(name), server: server)
    }

    /// The server URL with the database swapped (postgresql://.../NAME).
    var connectionURL: String {
        guard var components = URLComponents(string: server), server.hasPrefix("postgres") else {
            return server + " dbname=\(name)"
        }
        components.path = "/" + name
        return components.string ?? server
    }

    func drop() {
        _ = try? PostgresConnection(connectionString: server, logger: .postgres).execute("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
    }
}

struct CLITestError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// A churnwatch process started in the background.
final class RunningCLI: @unchecked Sendable {
    let process: Process
    private let out = Pipe()
    private let err = Pipe()
    private let lock = NSLock()
    private var stdoutData = Data()
    private var stderrData = Data()
    /// Signalled on output to either stream.
    private let stderrSignal = DispatchSemaphore(value: 0)

    init(_ arguments: [String], environment: [String: String]) throws {
        process = Process()
        process.executableURL = CLIRunner.binary
        process.arguments = arguments
        var env = CLIRunner.baseEnvironment
        env.merge(environment) { _, new in new }
        process.environment = env
        process.standardOutput = out
        process.standardError = err
        // At the end of a stream (the child exited) the handler is removed: a readable pipe at
        // its end would call it for ever, and its descriptor would stay open for the rest of the
        // test process (Foundation's Process.run() crashes once it holds more than about 1,300).
        out.fileHandleForReading.readabilityHandler = { [weak self] h in
            let d = h.availableData
            guard !d.isEmpty else { h.readabilityHandler = nil; return }
            guard let self else { return }
            self.lock.withLock { self.stdoutData.append(d) }
            self.stderrSignal.signal()
        }
        err.fileHandleForReading.readabilityHandler = { [weak self] h in
            let d = h.availableData
            guard !d.isEmpty else { h.readabilityHandler = nil; return }
            guard let self else { return }
            self.lock.withLock { self.stderrData.append(d) }
            self.stderrSignal.signal()
        }
        try CLIRunner.spawn(process)
    }

    var stderr: String { lock.withLock { String(decoding: stderrData, as: UTF8.self) } }
    var stdout: String { lock.withLock { String(decoding: stdoutData, as: UTF8.self) } }

    /// Waits (at most `timeout`, on a thread of its own) until stderr contains `text`; false if it never did.
    func waitForStderr(containing text: String, timeout: TimeInterval) async throws -> Bool {
        try await OwnThread.run { self.waitForStderrBlocking(containing: text, timeout: timeout) }
    }

    /// `waitForStderr` for code already on a thread of its own.
    func waitForStderrBlocking(containing text: String, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if stderr.contains(text) { return true }
            if !process.isRunning { return stderr.contains(text) }
            _ = stderrSignal.wait(timeout: .now() + 0.2)
        }
        return stderr.contains(text)
    }

    /// Waits (at most `timeout`, on a thread of its own) until stdout contains `text`; false if it never did.
    func waitForStdout(containing text: String, timeout: TimeInterval) async throws -> Bool {
        try await OwnThread.run {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline, self.process.isRunning, !self.stdout.contains(text) {
                _ = self.stderrSignal.wait(timeout: .now() + 0.2)
            }
            return self.stdout.contains(text)
        }
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits (on a thread of its own) for the exit and returns what it printed.
    func wait() async throws -> CLIRunner.Result {
        try await OwnThread.run { self.waitBlocking() }
    }

    /// `wait` for code already on a thread of its own.
    func waitBlocking() -> CLIRunner.Result {
        let exit = ChildExit.wait(for: process)
        out.fileHandleForReading.readabilityHandler = nil
        err.fileHandleForReading.readabilityHandler = nil
        let restOut = out.fileHandleForReading.readDataToEndOfFile()
        let restErr = err.fileHandleForReading.readDataToEndOfFile()
        lock.withLock {
            stdoutData.append(restOut)
            stderrData.append(restErr)
        }
        return CLIRunner.Result(status: exit.status, stdout: stdout, stderr: stderr, bySignal: exit.bySignal)
    }
}
