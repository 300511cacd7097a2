import AppStoreServerAPI
import ArgumentParser
import ChurnInput
import ChurnStore
import Foundation
import Logging

struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Register subscriptions from a CSV or JSON-lines file (idempotent).",
        discussion: """
            CSV needs a header naming original_transaction_id,app_account_token,customer_ref,environment[,receipt_data] \
            (any order; only original_transaction_id is required). JSON lines use the same keys.
            Bad lines are reported with their line number and skipped; the rest are imported.
            Subscriptions already registered are left unchanged. Exits 65 when nothing could be imported.
            An empty environment means the app's configured one: $APPSTORE_ENVIRONMENT, else Production.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    @Argument(help: "The file to import (- for standard input).")
    var file: String


    /// The environment rows without one are registered in: `APPSTORE_ENVIRONMENT` (the app's
    /// environment, ops/churnwatch.env.example), else Production.
    static func defaultEnvironment(_ env: [String: String]) throws -> String {
        guard let value = env["APPSTORE_ENVIRONMENT"]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return "Production" }
        guard let registered = AppStoreEnvironment(registered: value) else {
            throw CLIError.configuration("APPSTORE_ENVIRONMENT \"\(value)\" must be Production or Sandbox")
        }
        return registered.rawValue
    }

    static func spoolStandardInput() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("churnwatch-import-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]),
              let out = FileHandle(forWritingAtPath: url.path) else {
            throw CLIError(description: "cannot create a temporary file in \(FileManager.default.temporaryDirectory.path) for standard input (set TMPDIR)", exitCode: ExitStatus.configuration)
        }
        defer { try? out.close() }
        do {
            while let chunk = try FileHandle.standardInput.read(upToCount: 1 << 16), !chunk.isEmpty {
                try out.write(contentsOf: chunk)
            }
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw CLIError(description: "cannot copy standard input to \(url.path): \((error as NSError).localizedFailureReason ?? "write error")", exitCode: ExitStatus.dataError)
        }
        return url
    }

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let defaultEnvironment = try Self.defaultEnvironment(ProcessInfo.processInfo.environment)
            // Standard input is copied to a private temporary file in chunks, never held in memory whole.
            let input = file == "-" ? try Self.spoolStandardInput() : nil
            defer { if let input { try? FileManager.default.removeItem(at: input) } }
            let parser: SubscriptionImportParser
            do {
                parser = try SubscriptionImportParser(contentsOf: input ?? URL(fileURLWithPath: file), defaultEnvironment: defaultEnvironment)
            } catch let e as ImportFileError {
                throw CLIError(description: e.description, exitCode: ExitStatus.dataError)
            }
            // The deployment's app is kept the default app (added when missing); another must have been added.
            let store = try await app.singleStore(global, migrations: BuildMigrations.names(), marking: true)
            let counts: ImportCounts
            do {
                // Parsed whole before the transaction; the store copies the good records.
                counts = try await store.subscriptionsImport(try ImportSpool(parser))
            } catch let e as ImportFileError {
                throw CLIError(description: e.description, exitCode: ExitStatus.dataError)
            }
            for rejection in counts.rejections.prefix(20) {
                FileHandle.standardError.write(Data("churnwatch: \(file): \(rejection)\n".utf8))
            }
            if counts.rejectedCount > 20 {
                FileHandle.standardError.write(Data("churnwatch: \(file): ... and \(counts.rejectedCount - 20) more rejected lines\n".utf8))
            }
            print("imported \(counts.inserted) new subscriptions from \(counts.read) records "
                + "(\(counts.alreadyKnown) already registered, \(counts.duplicatesInFile) duplicates in the file, \(counts.rejectedCount) lines rejected)")
            if counts.read == 0 {
                throw CLIError(description: "nothing could be imported from \(file)", exitCode: ExitStatus.dataError)
            }
        }
    }
}
