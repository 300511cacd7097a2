import ArgumentParser
import Foundation
import Polling

/// The worker flags `run` and `backfill` share.
struct WorkerOptions: ParsableArguments {
    @Option(name: .customLong("concurrency"), parsing: .unconditional, help: "Apple requests in flight at once in this process (default: $CHURNWATCH_CONCURRENCY, else 32).")
    var concurrency: Int?

    @Option(name: .customLong("batch-size"), parsing: .unconditional, help: "Items claimed and committed together.")
    var batchSize = 32

    @Option(name: .customLong("max-duration"), parsing: .unconditional, help: ArgumentHelp("Stop claiming after this long and exit 75 (resumable), e.g. 6h.", valueName: "duration"))
    var maxDuration: String?

    @Option(name: .customLong("shutdown-grace"), parsing: .unconditional, help: ArgumentHelp("After a stop request, how long in-flight work may take (default 30s).", valueName: "duration"))
    var shutdownGrace = "30s"

    /// The flags into `options`, validated: one line naming the flag when wrong. No
    /// `--concurrency`: `CHURNWATCH_CONCURRENCY`, else 32.
    func apply(to options: inout RunOptions, join: Bool, environment env: [String: String] = ProcessInfo.processInfo.environment) throws {
        var resolved = 32
        if let concurrency {
            resolved = concurrency
        } else if let raw = env["CHURNWATCH_CONCURRENCY"]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty {
            guard let n = Int(raw), n > 0 else {
                throw CLIError.configuration("CHURNWATCH_CONCURRENCY \"\(raw)\" is not a positive whole number")
            }
            resolved = n
        }
        guard resolved > 0, batchSize > 0 else { throw CLIError.configuration("--concurrency and --batch-size must be positive") }
        // Larger values are typos; Apple's whole budget is 50 requests a second.
        guard resolved <= 10_000, batchSize <= 10_000 else {
            throw CLIError.configuration("--concurrency (CHURNWATCH_CONCURRENCY) and --batch-size must be at most 10000")
        }
        options.concurrency = resolved
        options.batchSize = batchSize
        options.join = join
        if let maxDuration {
            options.maxDuration = try parseDurationSetting("--max-duration", maxDuration, positive: true)
        }
        options.shutdownGrace = try parseDurationSetting("--shutdown-grace", shutdownGrace)
    }
}
