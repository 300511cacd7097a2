import AppStoreModels
@testable import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
@testable import Polling
import Testing

/// The change feed's decisions (``FeedApplier``): notifications in, commits out, no I/O.
@Suite struct FeedApplierTests {
    static let t0: Int64 = 1_790_820_000_000 // 2026-10-01T02:00:00Z
    static let day: Int64 = 86_400_000
    /// The sync's moment: after every notification below.
    static let t0date = Date(timeIntervalSince1970: Double(t0 + 10 * day) / 1000)

    /// A verified notification about subscription `otid`, signed at `at`, with auto-renew on or off.
    static func note(_ uuid: String, _ otid: String, at: Int64, autoRenew: Bool = true, type: String = "DID_CHANGE_RENEWAL_STATUS",
                     expires: Int64? = nil) -> FeedInput {
        let tx = JWSTransactionDecodedPayload(
            transactionId: "\(otid)-1", originalTransactionId: otid, webOrderLineItemId: "w\(otid)", bundleId: "com.example",
            productId: "monthly", subscriptionGroupIdentifier: "g", purchaseDate: EpochMilliseconds(t0 - 10 * day),
            originalPurchaseDate: EpochMilliseconds(t0 - 10 * day), expiresDate: EpochMilliseconds(expires ?? t0 + 20 * day),
            rawType: "Auto-Renewable Subscription", signedDate: EpochMilliseconds(at), rawEnvironment: "Production",
            price: 4990, currency: "USD")
        let renewal = JWSRenewalInfoDecodedPayload(
            originalTransactionId: otid, productId: "monthly", autoRenewProductId: "monthly", rawAutoRenewStatus: autoRenew ? 1 : 0,
            signedDate: EpochMilliseconds(at), rawEnvironment: "Production")
        let payload = ResponseBodyV2DecodedPayload(
            notificationType: type, subtype: autoRenew ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED", notificationUUID: uuid,
            data: NotificationData(appAppleId: 1, bundleId: "com.example", rawEnvironment: "Production", rawStatus: 1),
            version: "2.0", signedDate: EpochMilliseconds(at))
        let v = VerifiedNotification(payload: payload, notificationUUID: uuid, signedDate: EpochMilliseconds(at), environment: .production,
                                     transaction: tx, renewalInfo: renewal)
        return FeedInput(signedPayload: "jws-\(uuid)", verdict: .verified(v), source: .history)
    }

    static func uuid(_ n: Int) -> String { String(format: "00000000-0000-4000-8000-%012d", n) }

    /// The stored state `note` leaves, as a poll would have stored it.
    static func stored(_ input: FeedInput) -> ClaimedItem {
        let plan = FeedApplier().plan([input], known: [], stored: [:], establishOnly: false, now: Self.t0date)
        guard case .polled(let p) = plan.batches.last!.writes[0].outcome else { fatalError("not polled") }
        var item = ClaimedItem.unregistered(p.snapshot.originalTransactionId, environment: .production, appAccountToken: nil)
        item.snapshot = p.snapshot
        item.segment = p.segment
        return item
    }

    static func events(_ plan: FeedApplier.Plan) -> [String] {
        plan.batches.flatMap(\.writes).flatMap { w -> [String] in
            guard case .polled(let p) = w.outcome else { return [] }
            return p.events.map(\.type.rawValue)
        }
    }

    @Test func outOfOrderNotificationsAreAppliedInSignedDateOrderOnePerCommit() {
        let known = Self.stored(Self.note(Self.uuid(1), "A", at: Self.t0))
        // Given newest first: auto-renew off at t0+2d, then back on at t0+3d.
        let inputs = [Self.note(Self.uuid(3), "A", at: Self.t0 + 3 * Self.day, autoRenew: true),
                      Self.note(Self.uuid(2), "A", at: Self.t0 + 2 * Self.day, autoRenew: false)]
        let plan = FeedApplier().plan(inputs, known: [], stored: ["A": known], establishOnly: false, now: Self.t0date)
        #expect(plan.batches.count == 2)
        #expect(plan.batches.allSatisfy { $0.writes.count == 1 })
        #expect(Self.events(plan) == ["auto_renew_disabled", "auto_renew_enabled"])
        #expect(plan.batches.flatMap(\.records).map(\.outcome) == [.applied, .applied])
    }

    static func entries(_ plan: FeedApplier.Plan) -> [WinbackEntry] {
        plan.batches.flatMap(\.writes).flatMap { w -> [WinbackEntry] in
            guard case .polled(let p) = w.outcome else { return [] }
            return p.winback.entries
        }
    }

    @Test("win-back is decided once per sync, for the state it leaves, at its moment: a risk opened and closed between two syncs opens nothing")
    func winbackOnlyForRiskThatExistsAtTheSync() throws {
        let known = Self.stored(Self.note(Self.uuid(1), "A", at: Self.t0))
        let off = Self.note(Self.uuid(2), "A", at: Self.t0 + 2 * Self.day, autoRenew: false)
        let on = Self.note(Self.uuid(3), "A", at: Self.t0 + 3 * Self.day, autoRenew: true)
        let flipped = FeedApplier().plan([off, on], known: [], stored: ["A": known], establishOnly: false, now: Self.t0date)
        #expect(Self.events(flipped) == ["auto_renew_disabled", "auto_renew_enabled"], "the events are all kept")
        #expect(Self.entries(flipped).isEmpty, "nothing is at risk at the sync's moment")

        let left = FeedApplier().plan([off], known: [], stored: ["A": known], establishOnly: false, now: Self.t0date)
        let entry = try #require(Self.entries(left).first)
        #expect(Self.entries(left).count == 1 && entry.campaign == .saveOffer)
        #expect(entry.notBefore == Self.t0date, "opened at the sync's moment, not at the notification's")
        #expect(entry.expiresAt == Date(timeIntervalSince1970: Double(Self.t0 + 20 * Self.day) / 1000), "the period current at the sync")
    }

    @Test func repeatsAndRecordedUUIDsAreDuplicates() {
        let known = Self.stored(Self.note(Self.uuid(1), "A", at: Self.t0))
        var inbox = Self.note(Self.uuid(2), "A", at: Self.t0 + Self.day, autoRenew: false)
        inbox.inboxId = 7
        let inputs = [inbox, Self.note(Self.uuid(2), "A", at: Self.t0 + Self.day, autoRenew: false),
                      Self.note(Self.uuid(9), "A", at: Self.t0 + Self.day, autoRenew: false)]
        let plan = FeedApplier().plan(inputs, known: [UUID(uuidString: Self.uuid(9))!], stored: ["A": known], establishOnly: false, now: Self.t0date)
        #expect(plan.duplicates == 2)
        #expect(plan.batches.flatMap(\.records).count == 1)
        #expect(plan.batches.flatMap(\.inbox).map(\.outcome) == [.applied])
    }

    @Test("a notification older than the stored state writes no state: it goes to the commit as late, to be placed by its signedDate")
    func aNotificationOlderThanTheStoredStateIsLate() throws {
        let polledLater = Self.stored(Self.note(Self.uuid(1), "A", at: Self.t0 + 5 * Self.day))
        let plan = FeedApplier().plan([Self.note(Self.uuid(2), "A", at: Self.t0 + Self.day, autoRenew: false)],
                                      known: [], stored: ["A": polledLater], establishOnly: false, now: Self.t0date)
        #expect(plan.batches.flatMap(\.writes).isEmpty)
        let late = try #require(plan.batches.flatMap(\.late).first)
        #expect(late.originalTransactionId == "A" && late.uuid == UUID(uuidString: Self.uuid(2)))
        #expect(late.observation.named == .autoRenewDisabled && late.observation.snapshot.autoRenew == false)
        #expect(late.observation.asOf == Date(timeIntervalSince1970: Double(Self.t0 + Self.day) / 1000))
        #expect(plan.batches.flatMap(\.records).map(\.reason) == [FeedApplier.lateReason])
        // In a first sync it is stale, as before: nothing before the sync's moment is an event.
        let first = FeedApplier().plan([Self.note(Self.uuid(2), "A", at: Self.t0 + Self.day, autoRenew: false)],
                                       known: [], stored: ["A": polledLater], neverPolled: ["A"], establishOnly: true, now: Self.t0date)
        #expect(first.batches.flatMap(\.late).isEmpty && first.batches.flatMap(\.records).map(\.outcome) == [.stale])
    }

    @Test func anUnknownSubscriptionIsRegisteredAndEstablishedWithoutEvents() {
        let plan = FeedApplier().plan([Self.note(Self.uuid(1), "NEW", at: Self.t0, autoRenew: false),
                                       Self.note(Self.uuid(2), "NEW", at: Self.t0 + Self.day, autoRenew: true)],
                                      known: [], stored: [:], establishOnly: false, now: Self.t0date)
        #expect(plan.batches[0].register.map(\.id) == ["NEW"])
        // The first observation establishes state; the second is news about a known subscription.
        #expect(Self.events(plan) == ["auto_renew_enabled"])
    }

    @Test func theFirstSyncEstablishesNeverPolledSubscriptionsFromTheirNewestNotification() throws {
        let polled = Self.stored(Self.note(Self.uuid(1), "P", at: Self.t0))
        let inputs = [Self.note(Self.uuid(2), "NEW", at: Self.t0, autoRenew: false),
                      Self.note(Self.uuid(3), "NEW", at: Self.t0 + Self.day, autoRenew: true),
                      Self.note(Self.uuid(4), "NEW", at: Self.t0 + 2 * Self.day, autoRenew: false),
                      Self.note(Self.uuid(5), "P", at: Self.t0 + Self.day, autoRenew: false)]
        let plan = FeedApplier().plan(inputs, known: [], stored: ["P": polled], establishOnly: true, now: Self.t0date)
        // P was polled before the feed: its news is an event. NEW writes no event at all.
        #expect(Self.events(plan) == ["auto_renew_disabled"])
        let records = plan.batches.flatMap(\.records)
        // Every notification of NEW establishes it (its transaction kept), whatever batch it came in.
        #expect(records.filter { $0.originalTransactionId == "NEW" }.map(\.outcome) == [.applied, .applied, .applied])
        #expect(plan.batches.flatMap(\.writes).count == 2)
        let established = try #require(plan.batches[0].writes.first { $0.item.originalTransactionId == "NEW" })
        guard case .polled(let p) = established.outcome else { Issue.record("not polled"); return }
        #expect(p.snapshot.autoRenew == false && p.events.isEmpty)
        #expect(p.winback.entries.isEmpty, "win-back for risk that exists is enqueued once the first sync is read through")
        #expect(p.transactions.count == 3)
    }

    @Test("a first sync cut into batches anywhere establishes the same: state, notification outcomes, transactions, no win-back")
    func theFirstSyncDoesNotDependOnWhereBatchesEnd() throws {
        let inputs = (0..<6).map { k in Self.note(Self.uuid(10 + k), "NEW", at: Self.t0 + Int64(k) * Self.day, autoRenew: k % 2 == 1) }
        func outcome(_ cuts: [Int]) -> (autoRenew: Bool?, outcomes: [NotificationOutcome], transactions: Int, entries: Int) {
            var stored: [String: ClaimedItem] = [:]
            var outcomes: [NotificationOutcome] = [], transactions = 0, entries = 0
            var reasons: [String?] = []
            defer {
                // Issue 40: the last notification of each cut said nothing, so a first sync resumed
                // left NULL where an uninterrupted one wrote the reason.
                #expect(reasons == Array(repeating: FeedApplier.establishedReason, count: inputs.count), "cut at \(cuts): \(reasons)")
            }
            var from = 0
            for cut in cuts + [inputs.count] {
                let plan = FeedApplier().plan(Array(inputs[from..<cut]), known: [], stored: stored, neverPolled: Set(stored.keys),
                                              establishOnly: true, now: Self.t0date)
                from = cut
                for batch in plan.batches {
                    outcomes += batch.records.map(\.outcome)
                    reasons += batch.records.map(\.reason)
                    for w in batch.writes {
                        guard case .polled(let p) = w.outcome else { continue }
                        transactions += p.transactions.count
                        entries += p.winback.entries.count
                        var item = w.item
                        item.snapshot = p.snapshot
                        stored[item.originalTransactionId] = item
                    }
                }
            }
            return (stored["NEW"]?.snapshot?.autoRenew, outcomes, transactions, entries)
        }
        let whole = outcome([])
        #expect(whole.autoRenew == true && whole.outcomes == Array(repeating: .applied, count: 6) && whole.entries == 0)
        for cuts in [[1], [3], [5], [2, 4], [1, 2, 3, 4, 5]] {
            let cut = outcome(cuts)
            #expect(cut.autoRenew == whole.autoRenew && cut.outcomes == whole.outcomes && cut.entries == 0, "cut at \(cuts)")
        }
    }

    @Test("a notified change the stored state already shows (the change before it was never notified) is logged at its signedDate; one whose state contradicts its name is not")
    func aNotifiedChangeHiddenByAnUnnotifiedOneIsLogged() {
        // Stored: auto-renew on. Apple never notified it going off; now it notifies it back on.
        let known = Self.stored(Self.note(Self.uuid(1), "A", at: Self.t0))
        let on = FeedApplier().plan([Self.note(Self.uuid(2), "A", at: Self.t0 + Self.day, autoRenew: true)],
                                    known: [], stored: ["A": known], establishOnly: false, now: Self.t0date)
        #expect(Self.events(on) == ["auto_renew_enabled"])
        guard case .polled(let p) = on.batches[0].writes[0].outcome else { Issue.record("not polled"); return }
        #expect(p.events.first?.occurredAt == EpochMilliseconds(Self.t0 + Self.day).date)
        #expect(p.events.first?.details["occurred_at_basis"] == "signedDate")
        // A DID_CHANGE_RENEWAL_STATUS that says "disabled" while its renewal info says on: no event.
        var contradicting = Self.note(Self.uuid(3), "A", at: Self.t0 + Self.day, autoRenew: true)
        if case .verified(var v) = contradicting.verdict {
            v.payload.subtype = "AUTO_RENEW_DISABLED"
            contradicting.verdict = .verified(v)
        }
        let none = FeedApplier().plan([contradicting], known: [], stored: ["A": known], establishOnly: false, now: Self.t0date)
        #expect(Self.events(none).isEmpty)
    }

    @Test("a billing recovery whose failure was never notified: the renewal is logged as the recovery Apple names, not as a renewal")
    func aRecoveryAfterAnUnnotifiedFailure() {
        let known = Self.stored(Self.note(Self.uuid(1), "A", at: Self.t0))  // active, the period ends at t0 + 20 d
        var recovery = Self.note(Self.uuid(2), "A", at: Self.t0 + 22 * Self.day, type: "DID_RENEW", expires: Self.t0 + 50 * Self.day)
        if case .verified(var v) = recovery.verdict {
            v.payload.subtype = "BILLING_RECOVERY"
            v.transaction?.transactionId = "A-2"
            v.transaction?.webOrderLineItemId = "wA-2"
            v.transaction?.purchaseDate = EpochMilliseconds(Self.t0 + 20 * Self.day)
            v.transaction?.rawTransactionReason = "RENEWAL"
            recovery.verdict = .verified(v)
        }
        let plan = FeedApplier().plan([recovery], known: [], stored: ["A": known], establishOnly: false, now: Self.t0date + 20 * 86_400)
        #expect(Self.events(plan) == ["billing_recovered"])
        guard case .polled(let p) = plan.batches[0].writes[0].outcome else { Issue.record("not polled"); return }
        #expect(p.events.first?.occurredAt == EpochMilliseconds(Self.t0 + 20 * Self.day).date)
        #expect(p.events.first?.details["notified"] == "true")
        // A plain renewal notification for the same answer stays a renewal.
        var renewal = recovery
        if case .verified(var v) = renewal.verdict {
            v.payload.subtype = nil
            renewal.verdict = .verified(v)
        }
        let plain = FeedApplier().plan([renewal], known: [], stored: ["A": known], establishOnly: false, now: Self.t0date + 20 * 86_400)
        #expect(Self.events(plain) == ["renewed"])
    }

    @Test func aRejectedPayloadReadAgainIsRejectedAgainButKeptOnce() {
        let bad = { (digest: String) in FeedInput(signedPayload: "x", verdict: .rejected("notThreeParts(1)"), source: .history, digest: digest) }
        let plan = FeedApplier().plan([bad("d1"), bad("d1"), bad("d2"), bad("d3")], known: [], knownRejected: ["d2"], stored: [:],
                                      establishOnly: false, now: Self.t0date)
        #expect(plan.batches.flatMap(\.records).map(\.payloadDigest) == ["d1", "d3"])
        #expect(plan.batches.flatMap(\.quarantine).count == 2)
        #expect(plan.quarantinedAgain == 2 && plan.duplicates == 0)
    }

    @Test func aRejectedPayloadIsQuarantinedWithoutAUUIDAndAboutNothingIsIgnored() {
        var rejected = FeedInput(signedPayload: "not-a-jws", verdict: .rejected("notThreeParts(1)"), source: .inbox)
        rejected.inboxId = 3
        let test = FeedInput(signedPayload: "t", verdict: .verified(VerifiedNotification(
            payload: ResponseBodyV2DecodedPayload(notificationType: "TEST", notificationUUID: Self.uuid(8)),
            notificationUUID: Self.uuid(8), signedDate: EpochMilliseconds(Self.t0), environment: .production,
            transaction: nil, renewalInfo: nil)), source: .history)
        let plan = FeedApplier().plan([rejected, test], known: [], stored: [:], establishOnly: false, now: Self.t0date)
        let records = plan.batches.flatMap(\.records)
        #expect(records.map(\.outcome) == [.quarantined, .ignored])
        #expect(records[0].uuid == nil && records[0].reason == "notThreeParts(1)")
        #expect(plan.batches[0].quarantine.map(\.payload.payload) == ["not-a-jws"])
        #expect(plan.batches[0].inbox.map(\.outcome) == [.quarantined])
        #expect(plan.batches.flatMap(\.writes).isEmpty)
    }
}

/// How a batch is shared among the connections that apply it at once (``FeedSync/lanes(_:count:)``).
@Suite struct FeedLaneTests {
    static func otid(_ input: FeedInput) -> String? {
        if case .verified(let v) = input.verdict { return v.originalTransactionId }
        return nil
    }

    @Test func aSubscriptionsNotificationsShareOneLaneInTheirOrderAndRejectedOnesGoFirst() {
        var inputs: [FeedInput] = []
        for n in 0..<400 { inputs.append(FeedApplierTests.note(FeedApplierTests.uuid(n), "S\(n % 37)", at: FeedApplierTests.t0 + Int64(n))) }
        inputs.insert(FeedInput(signedPayload: "not a jws", verdict: .rejected("bad"), source: .ingest), at: 150)
        let lanes = FeedSync.lanes(inputs, count: 2)
        #expect(lanes.count == 2)
        #expect(lanes.map(\.count).reduce(0, +) == inputs.count)
        #expect(lanes[0].contains { if case .rejected = $0.verdict { true } else { false } })
        #expect(!lanes[1].contains { if case .rejected = $0.verdict { true } else { false } })
        // Every subscription in exactly one lane, its notifications in the order given.
        var laneOf: [String: Int] = [:]
        for (k, lane) in lanes.enumerated() {
            for id in Set(lane.compactMap(Self.otid)) {
                #expect(laneOf.updateValue(k, forKey: id) == nil, "\(id) is in two lanes")
            }
            let order = lane.map(\.signedPayload)
            let given = inputs.map(\.signedPayload).filter(Set(order).contains)
            #expect(order == given)
        }
        #expect(laneOf.count == 37)
        // Both lanes get a real share (FNV-1a spreads these ids), and the split is stable.
        #expect(lanes.allSatisfy { $0.count > 100 }, "\(lanes.map(\.count))")
        #expect(FeedSync.lanes(inputs, count: 2).map { $0.map(\.signedPayload) } == lanes.map { $0.map(\.signedPayload) })
    }

    @Test func oneLaneOrNothingIsTheBatchAsItIs() {
        let inputs = (0..<5).map { FeedApplierTests.note(FeedApplierTests.uuid($0), "S\($0)", at: FeedApplierTests.t0) }
        #expect(FeedSync.lanes(inputs, count: 1).map { $0.map(\.signedPayload) } == [inputs.map(\.signedPayload)])
        #expect(FeedSync.lanes([], count: 2).isEmpty)
        #expect(FeedSync.lanes(inputs, count: 0).count == 1)
    }
}
