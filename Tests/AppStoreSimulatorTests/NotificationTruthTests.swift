import AppStoreModels
import AppStoreServerAPI
import Foundation
import Testing
import X509
@testable import AppStoreSimulator

/// Notifications V2 against the ground truth, churnwatch's verifier and the options.
@Suite struct NotificationTruthTests {
    static let day = SimTime.day

    @Test(arguments: [false, true])
    func notificationsVerifyWithChurnwatchsVerifier(strictX509: Bool) async throws {
        let sim = try await SimHarness.start(subscribers: 600, configure: { $0.sandboxShare = 0.2 })
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=5d")
        let verifier = SignedDataVerifier(
            rootCertificates: [try Certificate(derEncoded: sim.identity.chain.rootDER)],
            bundleId: sim.population.config.bundleId, options: .init(strictX509: strictX509))
        for sandbox in [false, true] {
            let env: AppStoreEnvironment = sandbox ? .sandbox : .production
            let items = try await sim.allNotifications(["startDate": sim.now - 20 * Self.day, "endDate": sim.now], sandbox: sandbox).items
            #expect(items.count > (sandbox ? 5 : 50))
            for item in items.prefix(sandbox ? 40 : 120) {
                _ = try await verifier.verify(item.signedPayload, as: GenericSignedPayload.self)
                let n = try payload(item.signedPayload, as: DecodedNotification.self)
                // What verifyAndDecodeNotification checks (docs/apple-api.md, "Verifying").
                #expect(n.data.bundleId == sim.population.config.bundleId)
                #expect(n.data.appAppleId == sim.population.config.appAppleId)
                #expect(n.data.environment == env.rawValue)
                let t = try await verifier.verifyTransaction(n.data.signedTransactionInfo, environment: env)
                let r = try await verifier.verifyRenewalInfo(n.data.signedRenewalInfo, environment: env)
                #expect(t.originalTransactionId == r.originalTransactionId)
                #expect(t.signedDate?.rawValue == n.signedDate && r.signedDate?.rawValue == n.signedDate)
            }
        }
    }

    /// Every notified true change has its notification (same moment, subscription, type, state),
    /// every notification reports true changes, and the unnotified share is missing from the feed.
    @Test func notificationsAgreeWithTheTruthEvents() async throws {
        var options = SimulatorOptions()
        options.notifications.unnotifiedShare = 0.25
        let sim = try await SimHarness.start(subscribers: 1500, options: options)
        defer { Task { try? await sim.stop() } }
        let from = sim.now
        _ = try await sim.post("/_sim/clock?advance=25d")
        let pop = sim.population
        let items = try await sim.allNotifications(["startDate": from, "endDate": sim.now]).items
        var byUUID: [String: DecodedNotification] = [:]
        for item in items {
            let n = try payload(item.signedPayload, as: DecodedNotification.self)
            byUUID[n.notificationUUID] = n
        }
        let events = try await sim.truthEvents(from: from, to: sim.now).filter {
            !pop.isSandbox(pop.locate(transactionId: $0["original_transaction_id"] as! String)!.subscriber)
        }
        var notified = 0, referenced = Set<String>()
        for e in events {
            guard e["notified"] as? Bool == true else {
                #expect(e["notification_uuid"] is NSNull)
                continue
            }
            notified += 1
            let uuid = try #require(e["notification_uuid"] as? String)
            referenced.insert(uuid)
            let n = try #require(byUUID[uuid], "\(e)")
            let t = try payload(n.data.signedTransactionInfo, as: JWSTransactionDecodedPayload.self)
            let r = try payload(n.data.signedRenewalInfo, as: JWSRenewalInfoDecodedPayload.self)
            #expect(SimTime.format(n.signedDate) == e["occurred_at"] as? String)
            #expect(t.originalTransactionId == e["original_transaction_id"] as? String)
            if let (type, subtype) = expectedNotification(e) {
                #expect(n.notificationType == type && n.subtype == subtype, "\(e)")
            } else {
                let allowed: [(String, String?)] = [("DID_RENEW", nil), ("DID_CHANGE_RENEWAL_PREF", "UPGRADE")]
                #expect(allowed.contains { $0 == (n.notificationType, n.subtype) }, "\(e)")
            }
            try checkState(e, status: n.data.status, transaction: t, renewal: r)
        }
        #expect(Set(byUUID.keys) == referenced, "every notification reports true changes, and only notified ones")
        let share = Double(notified) / Double(events.count)
        #expect(events.count > 500 && share > 0.68 && share < 0.82, "about 75 % notified: \(share)")
        // The status of a notification is the truth's status at its moment.
        for n in byUUID.values.sorted(by: { $0.signedDate < $1.signedDate }).enumerated().filter({ $0.offset % 97 == 0 }).map(\.element) {
            let truth = try #require(try await sim.get("/_sim/truth?at=\(SimTime.format(n.signedDate))", token: "").json as? [String: Any])
            let otid = payloadOTID(n)
            let s = (truth["subscriptions"] as? [[String: Any]])?.first { $0["original_transaction_id"] as? String == otid }
            #expect(s?["status"] as? Int == Int(n.data.status))
            #expect(s?["transaction_id"] as? String == (try payload(n.data.signedTransactionInfo, as: JWSTransactionDecodedPayload.self)).transactionId)
        }
    }

    func checkState(_ e: [String: Any], status: Int32, transaction t: JWSTransactionDecodedPayload,
                    renewal r: JWSRenewalInfoDecodedPayload) throws {
        let details = e["details"] as? [String: Any] ?? [:]
        switch e["event"] as? String {
        case "auto_renew_disabled": #expect(r.rawAutoRenewStatus == 0 && status == 1)
        case "auto_renew_enabled": #expect(r.rawAutoRenewStatus == 1)
        case "expired":
            #expect(status == 2)
            #expect(Int(r.rawExpirationIntent ?? 0) == details["expiration_intent"] as? Int)
        case "refunded": #expect(t.revocationDate != nil && status == 5)
        case "refund_reversed": #expect(t.revocationDate == nil)
        case "grace_period_started": #expect(status == 4 && r.gracePeriodExpiresDate != nil)
        case "billing_retry_started": #expect(status == 3 && r.isInBillingRetryPeriod == true)
        case "renewed", "billing_recovered", "resubscribed":
            #expect(status == 1 && t.transactionId == details["transaction_id"] as? String)
        case "price_increase_pending": #expect(r.rawPriceIncreaseStatus == 0)
        case "plan_change_scheduled": #expect(r.autoRenewProductId == details["auto_renew_product_id"] as? String)
        case "refund_requested", "refund_declined":
            #expect(status == 1 && t.revocationDate == nil && t.transactionId == details["transaction_id"] as? String)
        default: break
        }
    }

    @Test func anAppWithoutANotificationURLHasNoHistory() async throws {
        var options = SimulatorOptions()
        options.notifications.hasURL = false
        let sim = try await SimHarness.start(subscribers: 500, options: options)
        defer { Task { try? await sim.stop() } }
        _ = try await sim.post("/_sim/clock?advance=10d")
        let r = try await sim.notificationHistory(["startDate": sim.now - 100 * Self.day, "endDate": sim.now])
        #expect(r.status == 200)
        let page = try r.decode(HistoryPage.self)
        #expect(page.notificationHistory.isEmpty && !page.hasMore)
        let events = try await sim.truthEvents(from: sim.now - 10 * Self.day, to: sim.now)
        #expect(!events.isEmpty && events.allSatisfy { $0["notified"] as? Bool == false })
        let changes = try await sim.notificationTruth(from: sim.now - 10 * Self.day, to: sim.now)
        #expect(!changes.isEmpty && changes.allSatisfy { $0["notified"] as? Bool == false })
    }

    @Test func theSameSeedNotifiesTheSameChangesWithTheSameUUIDs() async throws {
        var options = SimulatorOptions()
        options.notifications.unnotifiedShare = 0.1
        options.notifications.failedDeliveryShare = 0.1
        var bodies: [Data] = []
        var feeds: [[String]] = []
        for _ in 0..<2 {
            let sim = try await SimHarness.start(subscribers: 400, seed: 11, options: options)
            _ = try await sim.post("/_sim/clock?advance=8d")
            bodies.append(try await sim.get("/_sim/notifications", token: "").body)
            let items = try await sim.allNotifications(["startDate": sim.now - 30 * Self.day, "endDate": sim.now]).items
            feeds.append(try items.map {
                try payload($0.signedPayload, as: DecodedNotification.self).notificationUUID + "\($0.sendAttempts.map(\.attemptDate))"
            })
            try await sim.stop()
        }
        #expect(bodies[0] == bodies[1])
        #expect(feeds[0] == feeds[1] && feeds[0].count > 50)
    }

    @Test(arguments: [PayloadFault.rogueChain, .truncatedJWS, .foreignBundle])
    func faultySubscribersSendFaultyNotifications(_ kind: PayloadFault) async throws {
        var options = SimulatorOptions()
        options.faultRate = 1
        options.faultKinds = [kind]
        let sim = try await SimHarness.start(subscribers: 200, options: options)
        defer { Task { try? await sim.stop() } }
        let verifier = SignedDataVerifier(
            rootCertificates: [try Certificate(derEncoded: sim.identity.chain.rootDER)], bundleId: sim.population.config.bundleId)
        let items = try await sim.allNotifications(["startDate": sim.now - 20 * Self.day, "endDate": sim.now]).items
        let item = try #require(items.first)
        switch kind {
        case .foreignBundle:
            _ = try await verifier.verify(item.signedPayload, as: GenericSignedPayload.self)
            let n = try payload(item.signedPayload, as: DecodedNotification.self)
            #expect(n.data.bundleId != sim.population.config.bundleId)
        default:
            await #expect(throws: JWSVerificationFailure.self) {
                _ = try await verifier.verify(item.signedPayload, as: GenericSignedPayload.self)
            }
        }
    }
}
