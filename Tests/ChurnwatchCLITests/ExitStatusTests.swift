import ChurnInput
import ChurnModel
import Foundation
import Polling
@testable import churnwatch
import Testing

/// Errors a user can cause end in one line and the exit code of their kind.
@Suite struct ExitStatusTests {
    @Test func anUnreadableInputFileIsADataErrorNotABug() {
        let (line, code) = classify(ImportFileError("cannot read the input file: Input/output error; check the file and the disk"))
        #expect(code == ExitStatus.dataError && code == 65)
        #expect(line == "cannot read the input file: Input/output error; check the file and the disk")
    }

    /// A run, a backfill and `notifications sync` that stop the same way exit the same way, with
    /// the code docs/contracts.md gives for it.
    @Test func aStoppedRunExitsByOneTableThatTheContractPrints() throws {
        let stops: [RunStop] = [.signal, .timeBudget, .appleUnavailable("503", rateLimited: false), .appleUnavailable("429", rateLimited: true),
                                .database("gone"), .internalError("bug"), .keyRefused("401"), .untrustedServer("x")]
        #expect(stops.map(\.exitStatus) == [75, 75, 75, 75, 75, 75, 78, 69])
        let contracts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/contracts.md")
        let rows = try String(contentsOf: contracts, encoding: .utf8).split(separator: "\n").filter { $0.hasPrefix("| `") }
        func row(_ code: Int32) -> String { rows.first { $0.hasPrefix("| `\(code)`") }.map(String.init) ?? "" }
        #expect(row(78).contains("Apple rejected the API key"), "\(row(78))")
        #expect(row(69).contains("certificate is not trusted"), "\(row(69))")
        #expect(row(75).contains("Apple unavailable") && row(75).contains("PostgreSQL"), "\(row(75))")
    }
}
