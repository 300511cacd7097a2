import Foundation
import Testing

/// docs/architecture.md §4: every setting is an environment variable, also a flag; the flag wins.
@Suite("windows and concurrency from the environment (the binary)")
struct EnvironmentSettingsTests {
    @Test("plan takes each window from its CHURNWATCH_ variable unless the flag says otherwise")
    func windowsFromTheEnvironment() async throws {
        let db = try ScratchDatabase.create()
        defer { db.drop() }
        let env = ["DATABASE_URL": db.connectionURL, "APPSTORE_BUNDLE_ID": "com.example.churnwatch"]
        let migrate = try await CLIRunner.run(["migrate"], environment: env)
        #expect(migrate.status == 0, "\(migrate.stderr)")

        let plan = try await CLIRunner.run(["plan", "--as-of", "2026-11-01T02:00:00Z", "--end-window", "2d"], environment: env.merging([
            "CHURNWATCH_START_WINDOW": "12h", "CHURNWATCH_END_WINDOW": "9d", "CHURNWATCH_LAPSED_WINDOW": "5d",
            "CHURNWATCH_STALE_AFTER": "7d",
        ]) { _, new in new })
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(plan.stdout.contains("(start window 12h, end window 2d, lapsed window 5d, stale after 7d)"), "\(plan.stdout)")

        let defaults = try await CLIRunner.run(["plan", "--as-of", "2026-11-01T02:00:00Z"], environment: env)
        #expect(defaults.stdout.contains("(start window 3d, end window 3d, lapsed window 3d, stale after 30d)"), "\(defaults.stdout)")
    }

    @Test("a bad window or concurrency in the environment exits 78 in one line naming the variable")
    func badValuesNameTheVariable() async throws {
        // Both are rejected before any connection is made.
        let env = ["DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"]
        let window = try await CLIRunner.run(["plan"], environment: env.merging(["CHURNWATCH_STALE_AFTER": "often"]) { _, new in new })
        #expect(window.status == 78)
        #expect(window.stderr.contains("CHURNWATCH_STALE_AFTER \"often\""), "\(window.stderr)")
        #expect(window.stderr.split(separator: "\n").count == 1)

        let concurrency = try await CLIRunner.run(["run"], environment: env.merging(["CHURNWATCH_CONCURRENCY": "-4"]) { _, new in new })
        #expect(concurrency.status == 78)
        #expect(concurrency.stderr.contains("CHURNWATCH_CONCURRENCY \"-4\""), "\(concurrency.stderr)")
        #expect(concurrency.stderr.split(separator: "\n").count == 1)

        for (args, variable, value) in [(["run"], "CHURNWATCH_REFUND_DECLINE_AFTER", "1.5"), (["notifications", "sync"], "CHURNWATCH_REFUND_ANSWERS", "maybe"),
                                        (["notifications", "sync"], "CHURNWATCH_REFUND_DECLINE_AFTER", "half")] {
            let refunds = try await CLIRunner.run(args, environment: env.merging([variable: value]) { _, new in new })
            #expect(refunds.status == 78, "\(args) \(variable)=\(value): \(refunds.status)")
            #expect(refunds.stderr.contains("\(variable) \"\(value)\""), "\(refunds.stderr)")
            #expect(refunds.stderr.split(separator: "\n").count == 1)
        }

        // The flag wins over the variable: a good flag hides a bad variable.
        let flag = try await CLIRunner.run(["run", "--concurrency", "8"], environment: env.merging(["CHURNWATCH_CONCURRENCY": "-4"]) { _, new in new })
        #expect(!flag.stderr.contains("CHURNWATCH_CONCURRENCY"), "\(flag.stderr)")
    }

    @Test("a retention below its floor, an unknown table, a negative duration or CHURNWATCH_PRUNE neither on nor off exits 78 in one line, before any connection")
    func badRetentionSettings() async throws {
        let env = ["DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"]
        let cases: [([String], [String: String], String)] = [
            (["prune", "--retention", "notifications=30d"], [:], "notifications must be kept at least 180 days, not 30 days: Apple's notification history"),
            (["prune"], ["CHURNWATCH_RETENTION": "run_items=35d,bogus=1d"], "CHURNWATCH_RETENTION: \"bogus=1d\" is not table=duration"),
            (["prune", "--retention", "quarantine=-3d"], [:], "--retention quarantine \"-3d\" is negative"),
            (["run"], ["CHURNWATCH_PRUNE": "sometimes"], "CHURNWATCH_PRUNE \"sometimes\" is neither on nor off"),
            (["run"], ["CHURNWATCH_RETENTION": "run_items=1h"], "run_items must be kept at least 2 days"),
        ]
        for (args, extra, message) in cases {
            let r = try await CLIRunner.run(args, environment: env.merging(extra) { _, new in new })
            #expect(r.status == 78, "\(args) \(extra): \(r.stderr)")
            #expect(r.stderr.contains(message) && r.stderr.split(separator: "\n").count == 1, "\(args) \(extra): \(r.stderr)")
        }
    }
}
