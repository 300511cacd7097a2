import AppStoreServerAPI
import ArgumentParser
import ChurnStore
import Foundation
import Logging

struct InspectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Decode and verify a signed payload or a whole API response, or ask Apple about one subscription now.",
        discussion: """
            churnwatch inspect JWS|FILE|-    verify against the configured roots; prints every decoded field as JSON
                                             (needs APPSTORE_ROOT_CERTS, APPSTORE_BUNDLE_ID, APPSTORE_APP_APPLE_ID in
                                             Production, APPSTORE_ENVIRONMENT; not the In-App Purchase key)
            churnwatch inspect --otid ID     fetch status and full history for one subscription (writes nothing; needs the key)
            --app BUNDLE_ID                  as that app of the database (its bundle id, app Apple id, environment, key)
            Exits 0 only when everything verified; 1 rejected or not found; 69 Apple unavailable; 78 bad configuration.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions

    @Option(name: .customLong("otid"), help: "Ask Apple about this original transaction id.")
    var otid: String?

    @Argument(help: "A compact JWS, a file holding a JWS or a response, or - for standard input.")
    var input: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let logger = Logger(label: "churnwatch.inspect")
            let report: InspectionReport
            let record = try await appRecord()
            if let otid {
                let config = try record.map { try apple.configuration(for: $0, deploymentApp: AppOptions.deploymentApp(), logger: logger) }
                    ?? apple.configuration(logger: logger)
                // The report says what happened; the client's own lines would only repeat it.
                let client = AppStoreServerAPIClient(configuration: config,
                                                     logger: Logger(label: "churnwatch.appstore", factory: { _ in SwiftLogNoOpLogHandler() }))
                report = await Inspector(configuration: config, client: client).inspectSubscription(otid)
            } else if let input {
                let text: String
                do { text = try Inspector.readInput(input) } catch {
                    throw CLIError.configuration("cannot read \(input): \(error.localizedDescription)")
                }
                // Verifying needs the roots, the app and the environment; not the key.
                report = await Inspector(verification: try apple.verificationSettings(for: record, logger: logger)).inspect(text)
            } else {
                throw CLIError(description: "give a JWS, a file, - for standard input, or --otid ID", exitCode: 64)
            }
            print(report.json)
            FileHandle.standardError.write(Data((report.verdictLine + "\n").utf8))
            if report.exitCode != 0 { throw ExitCode(report.exitCode) }
        }
    }

    /// The app named with `--app`, from the database; nil without `--app` (the deployment's).
    func appRecord() async throws -> AppRecord? {
        guard !app.apps.isEmpty else { return nil }
        let store = DatabaseStore.open(try global.resolvedDatabaseURL())
        try await store.schemaCheck()
        let records = try app.selected(from: try await store.appsList())
        guard records.count == 1 else { throw CLIError.configuration("inspect works as one app: give --app once") }
        return records[0]
    }
}
