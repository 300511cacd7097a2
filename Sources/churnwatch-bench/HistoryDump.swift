import AppStoreServerAPI
import Foundation
import Logging

/// `history-dump FROM TO`: the signed payloads of Get Notification History between two ISO 8601
/// moments, one per line on stdout, read with churnwatch's client from the APPSTORE_*
/// environment: the input of `churnwatch notifications ingest` in `ops/bench feed`, so the
/// ingest is measured without the server that signs them.
struct HistoryDump {
    var from: Date
    var to: Date

    func run() async throws {
        let configuration = try AppStoreConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
        let client = AppStoreServerAPIClient(configuration: configuration, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
        let request = NotificationHistoryRequest(startDate: EpochMilliseconds(from), endDate: EpochMilliseconds(to))
        var token: String?
        var out = Data()
        repeat {
            let outcome = await client.notificationHistoryPage(request, paginationToken: token)
            guard let page = outcome.value else { throw BenchError("notification history: \(outcome)") }
            for record in page.records { if let p = record.signedPayload { out.append(Data((p + "\n").utf8)) } }
            if out.count > 1 << 20 {
                FileHandle.standardOutput.write(out)
                out.removeAll(keepingCapacity: true)
            }
            token = page.paginationToken
        } while token != nil
        FileHandle.standardOutput.write(out)
    }
}
