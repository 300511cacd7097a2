import Foundation
import Testing
@testable import ChurnModel

@Suite("SubscriptionSnapshot")
struct SubscriptionSnapshotTests {
    struct StatusCase: Sendable, CustomTestStringConvertible {
        let name: String
        let apple: Apple
        let state: SubscriptionState
        var testDescription: String { name }
    }

    @Test("Apple's status maps to the normalized state", arguments: [
        StatusCase(name: "1 active", apple: Apple(), state: .active),
        StatusCase(name: "2 expired", apple: Apple().expired(intent: 1), state: .expired),
        StatusCase(name: "3 billing retry", apple: Apple().billingFailed(), state: .billingRetry),
        StatusCase(name: "4 grace period", apple: Apple().billingFailed(grace: day(36)), state: .gracePeriod),
        StatusCase(name: "5 revoked", apple: Apple().revoked(at: day(3)), state: .revoked),
        StatusCase(name: "9 unknown: kept, flagged", apple: Apple().with { $0.status = 9 }, state: .unknown),
    ])
    func appleStatus(_ c: StatusCase) {
        let s = c.apple.snapshot(at: day(31))
        #expect(s.state == c.state)
        #expect(s.rawStatus == c.apple.status)
        #expect(s.unknownValues.contains(UnknownValue(field: "status", raw: "9")) == (c.state == .unknown))
    }

    struct LegacyCase: Sendable, CustomTestStringConvertible {
        let name: String
        let apple: Apple
        let asOf: Date
        let appleStatus: Int
        var testDescription: String { name }
    }

    /// Story (q): the legacy receipt path supplies the same facts without Apple's status; the
    /// status derived at `asOf` must give the same snapshot as the JWS answer with Apple's status.
    @Test("legacy receipt facts give the same snapshot as the JWS answer", arguments: [
        LegacyCase(name: "active, auto-renew on", apple: Apple(), asOf: day(10), appleStatus: 1),
        LegacyCase(name: "active, auto-renew off", apple: Apple().autoRenew(false), asOf: day(10), appleStatus: 1),
        LegacyCase(name: "grace period running", apple: Apple().billingFailed(grace: day(36)), asOf: day(31), appleStatus: 4),
        LegacyCase(name: "grace over, retry continues", apple: Apple().billingFailed(grace: day(36)).with { $0.status = 3 },
                   asOf: day(40), appleStatus: 3),
        LegacyCase(name: "billing retry without grace", apple: Apple().billingFailed(), asOf: day(31), appleStatus: 3),
        LegacyCase(name: "expired, intent 1", apple: Apple().expired(intent: 1), asOf: day(31), appleStatus: 2),
        LegacyCase(name: "retry stopped, intent 2", apple: Apple().expired(intent: 2), asOf: day(91), appleStatus: 2),
        LegacyCase(name: "cancelled during grace: renewal info removed",
                   apple: Apple().expired(intent: 1).with { $0.renewal = nil }, asOf: day(33), appleStatus: 2),
        LegacyCase(name: "cancellation (refund)", apple: Apple().revoked(at: day(5)), asOf: day(6), appleStatus: 5),
    ])
    func legacyMatchesJWS(_ c: LegacyCase) {
        var legacy = c.apple
        legacy.status = nil
        legacy.signedAt = nil
        legacy.transaction.transactionReason = nil
        var jws = legacy
        jws.status = c.appleStatus
        // Nothing is signed on the legacy path, so build both without signedDate.
        let fromLegacy = SubscriptionSnapshot(status: nil, transaction: legacy.transaction, renewal: legacy.renewal, asOf: c.asOf)
        let fromJWS = SubscriptionSnapshot(status: jws.status, transaction: jws.transaction, renewal: jws.renewal, asOf: c.asOf)
        #expect(fromLegacy == fromJWS)
        #expect(fromLegacy.rawStatus == c.appleStatus)
    }

    /// Apple removes a subscription from `pending_renewal_info` when its customer cancels during
    /// grace or retry: seen after billing trouble, the legacy answer means what the Server API
    /// says of the same customer (expired, intent 1), with the same segment and events.
    @Test("a legacy answer without renewal info after billing trouble: the customer cancelled",
          arguments: [Apple().billingFailed(grace: day(36)), Apple().billingFailed()])
    func legacyCancelledDuringBillingTrouble(_ before: Apple) throws {
        let previous = before.snapshot(at: day(31))
        let jws = before.expired(intent: 1)
        var legacyTransaction = jws.transaction
        legacyTransaction.transactionReason = nil
        let renewal = try #require(RenewalFacts.legacyCancelledDuringBillingTrouble(
            previous: previous, transaction: legacyTransaction, asOf: day(33)))
        let fromLegacy = SubscriptionSnapshot(status: nil, transaction: legacyTransaction, renewal: renewal, asOf: day(33))
        let fromJWS = jws.with { $0.signedAt = day(33) }.snapshot(at: day(33))
        #expect(fromLegacy.state == .expired && fromLegacy.expirationIntent == .customerCancelled)
        #expect(SegmentClassifier.segment(for: fromLegacy, asOf: day(33)) == .churnedVoluntary)
        let legacyEvents = ChangeDetector.events(previous: previous, current: fromLegacy, asOf: day(33)).events
        let jwsEvents = ChangeDetector.events(previous: previous, current: fromJWS, asOf: day(33)).events
        #expect(!legacyEvents.isEmpty)
        #expect(legacyEvents.map(\.type) == jwsEvents.map(\.type) && legacyEvents.map(\.details) == jwsEvents.map(\.details))

        // The next night's answer still has no element: the conclusion stands, nothing new happened.
        let carried = RenewalFacts.legacyCancelledDuringBillingTrouble(previous: fromLegacy, transaction: legacyTransaction, asOf: day(34))
        let nextNight = SubscriptionSnapshot(status: nil, transaction: legacyTransaction, renewal: carried, asOf: day(34))
        #expect(SegmentClassifier.segment(for: nextNight, asOf: day(34)) == .churnedVoluntary)
        #expect(ChangeDetector.events(previous: fromLegacy, current: nextNight, asOf: day(34)).events.isEmpty)
    }

    @Test("no renewal info concludes nothing without billing trouble before, or while the period runs")
    func legacyMissingRenewalInfoOtherwise() {
        let expired = Apple().expired(intent: nil).transaction
        #expect(RenewalFacts.legacyCancelledDuringBillingTrouble(previous: nil, transaction: expired, asOf: day(33)) == nil)
        #expect(RenewalFacts.legacyCancelledDuringBillingTrouble(previous: Apple().snapshot(at: day(20)), transaction: expired, asOf: day(33)) == nil)
        let renewed = Apple().newPeriod(2, at: day(32)).transaction
        #expect(RenewalFacts.legacyCancelledDuringBillingTrouble(previous: Apple().billingFailed().snapshot(at: day(31)), transaction: renewed, asOf: day(33)) == nil)
    }

    @Test("a legacy transaction without expiry gets no invented status")
    func legacyWithoutExpiry() {
        var t = Apple().transaction
        t.expiresDate = nil
        let s = SubscriptionSnapshot(status: nil, transaction: t, renewal: nil, asOf: day(1))
        #expect(s.state == .unknown)
        #expect(s.unknownValues == [UnknownValue(field: "status", raw: "missing")])
    }

    struct UnknownCase: Sendable, CustomTestStringConvertible {
        let field: String
        let raw: String
        let apple: Apple
        var testDescription: String { "\(field) = \(raw)" }
    }

    /// Story (n), per field: an unknown raw value is kept beside a nil typed view, and flagged.
    @Test("unknown enum values are kept and flagged", arguments: [
        UnknownCase(field: "autoRenewStatus", raw: "2", apple: Apple().with { $0.renewal?.autoRenewStatus = 2 }),
        UnknownCase(field: "expirationIntent", raw: "9", apple: Apple().expired(intent: 9)),
        UnknownCase(field: "priceIncreaseStatus", raw: "3", apple: Apple().with { $0.renewal?.priceIncreaseStatus = 3 }),
        UnknownCase(field: "offerType", raw: "5", apple: Apple().with { $0.transaction.offerType = 5 }),
        UnknownCase(field: "offerDiscountType", raw: "PAY_LATER", apple: Apple().with { $0.transaction.offerDiscountType = "PAY_LATER" }),
        UnknownCase(field: "renewalInfo.offerType", raw: "6", apple: Apple().with { $0.renewal?.offerType = 6 }),
        UnknownCase(field: "revocationReason", raw: "2", apple: Apple().revoked(at: day(2), reason: 2)),
        UnknownCase(field: "revocationType", raw: "REFUND_PARTIAL", apple: Apple().revoked(at: day(2), type: "REFUND_PARTIAL")),
        UnknownCase(field: "inAppOwnershipType", raw: "GIFTED", apple: Apple().with { $0.transaction.inAppOwnershipType = "GIFTED" }),
        UnknownCase(field: "environment", raw: "Staging", apple: Apple().with { $0.transaction.environment = "Staging" }),
        UnknownCase(field: "transactionReason", raw: "MIGRATION", apple: Apple().with { $0.transaction.transactionReason = "MIGRATION" }),
        UnknownCase(field: "type", raw: "Bundle", apple: Apple().with { $0.transaction.type = "Bundle" }),
    ])
    func unknownValuesFlagged(_ c: UnknownCase) throws {
        let s = c.apple.snapshot(at: day(31))
        #expect(s.unknownValues == [UnknownValue(field: c.field, raw: c.raw)])
        // Kept through a jsonb round trip.
        let decoded = try JSONDecoder().decode(SubscriptionSnapshot.self, from: JSONEncoder().encode(s))
        #expect(decoded == s)
        #expect(decoded.unknownValues == s.unknownValues)
    }

    @Test("typed views of known values")
    func typedViews() {
        let s = Apple().with {
            $0.transaction.offerType = 1
            $0.transaction.offerDiscountType = "FREE_TRIAL"
            $0.transaction.inAppOwnershipType = "FAMILY_SHARED"
            $0.renewal?.priceIncreaseStatus = 0
            $0.renewal?.autoRenewProductId = "lite.monthly"
        }.snapshot(at: day(1))
        #expect(s.offerType == .introductoryOffer)
        #expect(s.isFreeTrial)
        #expect(s.isFamilyShared)
        #expect(s.priceIncreaseStatus == .customerHasNotResponded)
        #expect(s.pendingProductId == "lite.monthly")
        #expect(s.autoRenew == true)
        #expect(s.environment == .production)
        #expect(s.transactionReason == .purchase)
        #expect(s.productType == .autoRenewableSubscription)
        #expect(s.unknownValues.isEmpty)
    }

    @Test("signedDate is the newest of transaction and renewal info")
    func newestSignedDate() {
        var a = Apple()
        a.transaction.signedDate = day(3)
        a.renewal?.signedDate = day(4)
        let s = SubscriptionSnapshot(status: 1, transaction: a.transaction, renewal: a.renewal, asOf: day(5))
        #expect(s.signedDate == day(4))
    }

    @Test("history shows an immediate upgrade out of the old product")
    func upgradeFromHistory() {
        let old = Apple().with { $0.transaction.isUpgraded = true }.transaction
        let new = Apple().newPeriod(2, at: day(10), product: "premium.monthly", reason: "PURCHASE")
        let s = SubscriptionSnapshot(status: 1, transaction: new.transaction, renewal: new.renewal, history: [old, new.transaction], asOf: day(11))
        #expect(s.upgradedFromProductId == "pro.monthly")
        let withoutHistory = SubscriptionSnapshot(status: 1, transaction: new.transaction, renewal: new.renewal, asOf: day(11))
        #expect(withoutHistory.upgradedFromProductId == nil)
    }

    @Test("the latest transaction of a legacy latest_receipt_info skips upgraded-away ones")
    func latestTransaction() {
        let first = Apple().transaction
        let second = Apple().newPeriod(2, at: day(30)).transaction
        let upgradedAway = Apple().newPeriod(3, at: day(60)).with { $0.transaction.isUpgraded = true }.transaction
        let upgrade = Apple().newPeriod(4, at: day(65), days: 25, product: "premium.monthly", reason: "PURCHASE").transaction
        let other = Apple().with { $0.transaction.originalTransactionId = "2000" ; $0.transaction.expiresDate = day(400) }.transaction
        #expect(SubscriptionSnapshot.latestTransaction(of: "1000", in: [upgrade, first, upgradedAway, other, second]) == upgrade)
        #expect(SubscriptionSnapshot.latestTransaction(of: "3000", in: [first]) == nil)
    }

    @Test("jsonb encoding is independent of the encoder's date strategy and has stable keys")
    func codableStable() throws {
        let s = Apple().billingFailed(grace: day(36)).with { $0.renewal?.eligibleWinBackOfferIds = ["wb1"] }.snapshot(at: day(31))
        let plain = JSONEncoder()
        plain.outputFormatting = .sortedKeys
        let iso = JSONEncoder()
        iso.outputFormatting = .sortedKeys
        iso.dateEncodingStrategy = .iso8601
        #expect(try plain.encode(s) == iso.encode(s))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        #expect(try decoder.decode(SubscriptionSnapshot.self, from: plain.encode(s)) == s)

        let object = try #require(try JSONSerialization.jsonObject(with: plain.encode(s)) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        #expect(object["state"] as? String == "grace_period")
        #expect(object["status"] as? Int == 4)
        #expect(object["original_transaction_id"] as? String == "1000")
        #expect((object["grace_period_expires_date_ms"] as? NSNumber)?.int64Value == 1_753_110_400_000)
        #expect(object["eligible_win_back_offer_ids"] as? [String] == ["wb1"])
    }

    @Test("facts decode straight from Apple's decoded JWS payloads (dates in ms)")
    func factsFromAppleJSON() throws {
        let transaction = """
        {"transactionId":"2000000000000002","originalTransactionId":"2000000000000001",
         "webOrderLineItemId":"2000000000000003","bundleId":"com.example.app","productId":"pro.monthly",
         "subscriptionGroupIdentifier":"21501453","purchaseDate":1750000000000,"originalPurchaseDate":1749000000000,
         "expiresDate":1752592000000,"quantity":1,"type":"Auto-Renewable Subscription","inAppOwnershipType":"PURCHASED",
         "signedDate":1750000001000,"offerType":1,"offerDiscountType":"FREE_TRIAL","environment":"Sandbox",
         "transactionReason":"PURCHASE","storefront":"USA","price":0,"currency":"USD",
         "appAccountToken":"7e3fb20b-4cdb-47cc-936d-99d65f608138"}
        """
        let renewal = """
        {"originalTransactionId":"2000000000000001","autoRenewProductId":"pro.monthly","productId":"pro.monthly",
         "autoRenewStatus":0,"renewalDate":1752592000000,"renewalPrice":9990,"currency":"USD",
         "eligibleWinBackOfferIds":["wb_a","wb_b"],"signedDate":1750000002000,"environment":"Sandbox"}
        """
        let t = try JSONDecoder().decode(TransactionFacts.self, from: Data(transaction.utf8))
        let r = try JSONDecoder().decode(RenewalFacts.self, from: Data(renewal.utf8))
        #expect(t.purchaseDate == Date(timeIntervalSince1970: 1_750_000_000))
        #expect(t.price == 0)
        #expect(r.autoRenewStatus == 0)
        #expect(r.eligibleWinBackOfferIds == ["wb_a", "wb_b"])
        #expect(try JSONDecoder().decode(TransactionFacts.self, from: JSONEncoder().encode(t)) == t)
        #expect(try JSONDecoder().decode(RenewalFacts.self, from: JSONEncoder().encode(r)) == r)
        let s = SubscriptionSnapshot(status: 1, transaction: t, renewal: r, asOf: Date(timeIntervalSince1970: 1_750_000_100))
        #expect(s.signedDate == Date(timeIntervalSince1970: 1_750_000_002))
        #expect(s.isFreeTrial)
        #expect(s.environment == .sandbox)
    }
}
