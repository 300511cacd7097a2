import AppStoreModels
import AppStoreServerAPI
import Foundation
import Logging
import Testing
import X509
@testable import AppStoreSimulator

/// The simulator's notification history read by churnwatch's own client over real HTTP, and each
/// record verified with `verifyNotification` (chain, app, environment, inner signed data).
@Suite struct ChurnwatchNotificationInteropTests {
    static let day = SimTime.day

    @Test func churnwatchsClientPagesAndVerifiesTheWholeFeed() async throws {
        let sim = try await SimHarness.start(subscribers: 800) { $0.sandboxShare = 0.2 }
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=6d")
        let client = AppStoreServerAPIClient(configuration: try ChurnwatchInteropTests().configuration(sim), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let start = sim.now - 10 * Self.day
        let request = NotificationHistoryRequest(startDate: EpochMilliseconds(start), endDate: EpochMilliseconds(sim.now))
        for env in [AppStoreEnvironment.production, .sandbox] {
            var uuids: [String] = [], token: String?, pages = 0
            repeat {
                let outcome = await client.notificationHistoryPage(request, paginationToken: token, environment: env)
                let page = try #require(outcome.value, "\(env) page \(pages + 1): \(outcome)")
                pages += 1
                for record in page.records {
                    let n = try await client.verifyNotification(try #require(record.signedPayload), environment: env)
                    #expect(n.environment == env && n.originalTransactionId != nil && n.transaction != nil && n.renewalInfo != nil)
                    #expect(n.transaction?.signedDate == n.signedDate, "inner data as of the notification's moment")
                    uuids.append(n.notificationUUID)
                }
                token = page.paginationToken
            } while token != nil
            let truth = try await sim.notificationTruth(from: start, to: sim.now + 1)
                .filter { $0["environment"] as? String == env.rawValue && $0["notified"] as? Bool == true }
            #expect(uuids == truth.map { $0["notification_uuid"] as! String }, "\(env): every notified change, in signedDate order")
            #expect(env == .sandbox || pages > 3)
        }
    }

    @Test(arguments: [PayloadFault.rogueChain, .truncatedJWS, .foreignBundle])
    func faultyNotificationsAreRejectedWithTheirReason(_ kind: PayloadFault) async throws {
        var options = SimulatorOptions()
        options.faultRate = 1
        options.faultKinds = [kind]
        let sim = try await SimHarness.start(subscribers: 100, options: options)
        defer { Task { try? await sim.stop() } }
        let client = AppStoreServerAPIClient(configuration: try ChurnwatchInteropTests().configuration(sim), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let request = NotificationHistoryRequest(startDate: EpochMilliseconds(sim.now - 20 * Self.day), endDate: EpochMilliseconds(sim.now))
        let page = try #require(await client.notificationHistoryPage(request).value)
        let signed = try #require(page.records.first?.signedPayload)
        do {
            let n = try await client.verifyNotification(signed)
            Issue.record("\(kind): accepted \(n.notificationUUID)")
        } catch {
            ChurnwatchInteropTests.expectRejectionFits(kind, error)
        }
    }
}
