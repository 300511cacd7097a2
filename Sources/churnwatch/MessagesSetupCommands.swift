import AppStoreModels
import AppStoreServerAPI
import ArgumentParser
import Foundation

/// `messages url`: where Apple sends Get Retention Message, per environment.
struct RealtimeURLCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url", abstract: "Set, show or delete the realtime URL Apple calls (per environment; Production needs a passed performance test).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Argument(help: "set, get or delete.") var action: String
    @Option(name: .customLong("url"), help: "set: the HTTPS URL of serve's POST /apple/retention-message.") var url: String?
    @Option(name: .customLong("in"), help: "Production or Sandbox (default Production).") var environment = "Production"

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            guard let env = AppStoreEnvironment(rawValue: environment) else { throw CLIError.configuration("--in \(environment.prefix(40)) is not Production or Sandbox") }
            let (client, _) = try await MessagesApple.open(global, app, apple)
            switch action {
            case "set":
                guard let url, let parsed = URL(string: url), parsed.scheme == "https" || parsed.host == "127.0.0.1" || parsed.host == "localhost",
                      url.count <= RetentionMessageLimits.realtimeURL else {
                    throw CLIError.configuration("--url \((url ?? "").prefix(80)) is not an HTTPS URL of at most 256 characters (Apple only calls HTTPS)")
                }
                _ = try MessagesApple.value(await client.setRealtimeURL(url, environment: env), "setting the \(env.rawValue) realtime URL")
                print("realtime URL set (\(env.rawValue)): \(url)")
            case "get":
                let body = try MessagesApple.value(await client.realtimeURL(environment: env), "reading the \(env.rawValue) realtime URL")
                print(body.realtimeURL ?? "(none)")
            case "delete":
                _ = try MessagesApple.value(await client.deleteRealtimeURL(environment: env), "deleting the \(env.rawValue) realtime URL")
                print("realtime URL deleted (\(env.rawValue))")
            default:
                throw CLIError(description: "messages url takes set, get or delete", exitCode: ExitStatus.usage)
            }
        }
    }
}

/// `messages performance-test`: Apple's test of the Sandbox realtime URL, awaited.
struct PerformanceTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "performance-test",
        abstract: "Run Apple's performance test against the Sandbox realtime URL and print its result (exit 0 PASS, 65 FAIL).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Option(name: .customLong("original-transaction-id"), help: "A Sandbox purchase of the app.") var otid: String
    @Option(name: .customLong("wait"), parsing: .unconditional, help: ArgumentHelp("How long to wait for the result.", valueName: "duration"))
    var wait = "10m"
    @Option(name: .customLong("poll-every"), parsing: .unconditional, help: ArgumentHelp("How often to ask for the result.", valueName: "duration"))
    var pollEvery = "5s"

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let waitFor = try parseDurationSetting("--wait", wait, positive: true)
            let every = try parseDurationSetting("--poll-every", pollEvery, positive: true)
            let (client, _) = try await MessagesApple.open(global, app, apple)
            let started = try MessagesApple.value(await client.startPerformanceTest(originalTransactionId: otid), "starting the performance test")
            guard let id = started.requestId else { throw CLIError(description: "Apple started no performance test (no requestId)", exitCode: ExitStatus.dataError) }
            FileHandle.standardError.write(Data("churnwatch: performance test \(id) started; waiting for its result\n".utf8))
            let deadline = Date().addingTimeInterval(waitFor)
            while true {
                let result = try MessagesApple.value(await client.performanceTestResult(requestId: id), "reading performance test \(id)")
                if result.result != "PENDING" || Date() >= deadline {
                    print(try JSONOutput.line(result))
                    switch result.result {
                    case "PASS": return
                    case "FAIL": throw CLIError(description: "performance test \(id) failed: success rate \(result.successRate ?? 0)", exitCode: ExitStatus.dataError)
                    default: throw CLIError.resumable("performance test \(id) still pending after --wait \(wait): ask again later")
                    }
                }
                // Polling Apple's result endpoint at the operator's pace, not synchronization.
                try await Task.sleep(for: .seconds(every))
            }
        }
    }
}
