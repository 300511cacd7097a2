import AppStoreModels
import Foundation
import Testing

@Suite("Wire models decode Apple's JSON")
struct ModelsDecodingTests {
    @Test func transactionWithEveryField() throws {
        let t = try Fixture.decode(JWSTransactionDecodedPayload.self, "transaction-full")
        #expect(t.transactionId == "2000000123456789")
        #expect(t.originalTransactionId == "2000000000000001")
        #expect(t.webOrderLineItemId == "2000000000000042")
        #expect(t.bundleId == "com.example.app")
        #expect(t.productId == "com.example.monthly")
        #expect(t.subscriptionGroupIdentifier == "21501453")
        #expect(t.purchaseDate == 1_698_148_900_000)
        #expect(t.originalPurchaseDate?.milliseconds == 1_698_148_800_000)
        #expect(t.expiresDate?.date == Date(timeIntervalSince1970: 1_700_827_300))
        #expect(t.quantity == 1)
        #expect(t.type == .autoRenewableSubscription)
        #expect(t.appAccountTokenUUID == UUID(uuidString: "7E3FB20B-4CDB-47CC-936D-99D65F608138"))
        #expect(t.inAppOwnershipType == .purchased)
        #expect(t.signedDate == 1_698_148_950_123)
        #expect(t.revocationDate == 1_698_149_000_000)
        #expect(t.revocationReason == .actualOrPerceivedIssue)
        #expect(t.revocationType == .refundProrated)
        #expect(t.revocationPercentage == 42_500)
        #expect(t.isUpgraded == false)
        #expect(t.offerType == .winBackOffer)
        #expect(t.offerIdentifier == "winback-2024")
        #expect(t.offerDiscountType == .payAsYouGo)
        #expect(t.offerPeriod == "P3M")
        #expect(t.environment == .production)
        #expect(t.storefront == "USA")
        #expect(t.storefrontId == "143441")
        #expect(t.transactionReason == .renewal)
        #expect(t.price == 10_990)
        #expect(t.currency == "USD")
        #expect(t.appTransactionId == "704289572311513224")
        #expect(t.billingPlanType == .monthly)
        #expect(t.commitmentInfo == TransactionCommitmentInfo(
            billingPeriodNumber: 3, totalBillingPeriods: 12,
            commitmentExpiresDate: 1_730_000_000_000, commitmentPrice: 119_880))
        #expect(t.previousOriginalTransactionId == "1999999999999999")
        guard case .object(let info)? = t.advancedCommerceInfo, case .array(let items)? = info["items"],
              case .object(let item)? = items.first
        else { Issue.record("advancedCommerceInfo not kept"); return }
        #expect(item["price"] == .integer(990))
        #expect(item["ratio"] == .double(0.5))
        #expect(item["flag"] == .bool(true))
        #expect(item["none"] == .null)
    }

    @Test func unknownEnumValuesAndFieldsDecode() throws {
        let t = try Fixture.decode(JWSTransactionDecodedPayload.self, "transaction-unknown")
        #expect(t.transactionId == "2000000999")
        #expect(t.type == nil && t.rawType == "Hologram Subscription")
        #expect(t.inAppOwnershipType == nil && t.rawInAppOwnershipType == "GIFTED")
        #expect(t.revocationReason == nil && t.rawRevocationReason == 7)
        #expect(t.revocationType == nil && t.rawRevocationType == "REFUND_PARTIAL_FUTURE")
        #expect(t.offerType == nil && t.rawOfferType == 9)
        #expect(t.offerDiscountType == nil && t.rawOfferDiscountType == "PAY_LATER")
        #expect(t.environment == nil && t.rawEnvironment == "Staging")
        #expect(t.transactionReason == nil && t.rawTransactionReason == "MIGRATION")
        #expect(t.billingPlanType == nil && t.rawBillingPlanType == "WEEKLY")

        let r = try Fixture.decode(JWSRenewalInfoDecodedPayload.self, "renewal-unknown")
        #expect(r.autoRenewStatus == nil && r.rawAutoRenewStatus == 2)
        #expect(r.expirationIntent == nil && r.rawExpirationIntent == 99)
        #expect(r.priceIncreaseStatus == nil && r.rawPriceIncreaseStatus == 5)
        #expect(r.offerType == nil && r.rawOfferType == 0)
        #expect(r.environment == nil && r.rawEnvironment == "Moon")
        #expect(r.renewalBillingPlanType == nil && r.rawRenewalBillingPlanType == "DAILY")

        let s = try Fixture.decode(StatusResponse.self, "status-response")
        let items = s.data?.first?.lastTransactions ?? []
        #expect(items.count == 2)
        #expect(items[0].status == .active)
        #expect(items[1].status == nil && items[1].rawStatus == 6)
    }

    @Test func renewalInfoWithEveryField() throws {
        let r = try Fixture.decode(JWSRenewalInfoDecodedPayload.self, "renewal-full")
        #expect(r.originalTransactionId == "2000000000000001")
        #expect(r.productId == "com.example.yearly")
        #expect(r.autoRenewProductId == "com.example.monthly")
        #expect(r.autoRenewStatus == .off)
        #expect(r.expirationIntent == .customerCancelled)
        #expect(r.isInBillingRetryPeriod == true)
        #expect(r.gracePeriodExpiresDate == 1_700_913_700_000)
        #expect(r.priceIncreaseStatus == .customerHasNotResponded)
        #expect(r.renewalDate == 1_700_827_300_000)
        #expect(r.renewalPrice == 9_990)
        #expect(r.currency == "EUR")
        #expect(r.offerType == .promotionalOffer)
        #expect(r.offerIdentifier == "promo-save")
        #expect(r.offerDiscountType == .freeTrial)
        #expect(r.offerPeriod == "P1M")
        #expect(r.eligibleWinBackOfferIds == ["wb-best", "wb-second"])
        #expect(r.recentSubscriptionStartDate == 1_690_000_000_000)
        #expect(r.signedDate == 1_698_148_950_123)
        #expect(r.environment == .sandbox)
        #expect(r.appAccountToken == "not-a-uuid" && r.appAccountTokenUUID == nil)
        #expect(r.appTransactionId == "704289572311513224")
        #expect(r.renewalBillingPlanType == .billedUpfront)
        #expect(r.commitmentInfo?.commitmentAutoRenewStatus == .on)
        #expect(r.commitmentInfo?.commitmentRenewalBillingPlanType == .monthly)
        #expect(r.commitmentInfo?.commitmentRenewalDate == 1_731_000_000_000)
        #expect(r.commitmentInfo?.commitmentRenewalPrice == 119_880)
        #expect(r.commitmentInfo?.commitmentAutoRenewProductId == "com.example.yearly")
        #expect(r.advancedCommerceInfo == .object(["consistencyToken": .string("t")]))
    }

    @Test func responsesDecode() throws {
        let s = try Fixture.decode(StatusResponse.self, "status-response")
        #expect(s.environment == .production)
        #expect(s.bundleId == "com.example.app")
        #expect(s.appAppleId == 1_234_567_890)
        #expect(s.data?.first?.subscriptionGroupIdentifier == "21501453")
        #expect(s.data?.first?.lastTransactions?.first?.signedRenewalInfo == "eyJ.c.d")

        let h = try Fixture.decode(HistoryResponse.self, "history-response")
        #expect(h.revision == "1698148900000_2000000123456789")
        #expect(h.hasMore == true)
        #expect(h.environment == .sandbox)
        #expect(h.signedTransactions == ["a.b.c", "d.e.f"])

        let r = try Fixture.decode(RefundHistoryResponse.self, "refund-history-response")
        #expect(r.signedTransactions == [] && r.hasMore == false && r.revision == "1698148900000_1")

        let e = try Fixture.decode(ErrorPayload.self, "error-payload")
        #expect(e.errorCode == 4_040_010 && e.errorMessage == "Transaction id not found.")
    }

    /// A simulator encodes these types to serve responses: the round trip must keep Apple's
    /// field names and every value, including unknown raw enum values.
    @Test func encodeRoundTripKeepsAppleNames() throws {
        for name in ["transaction-full", "transaction-unknown"] {
            let t = try Fixture.decode(JWSTransactionDecodedPayload.self, name)
            let json = try JSONEncoder().encode(t)
            #expect(try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: json) == t)
            let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
            #expect(object["type"] != nil && object["rawType"] == nil)
            #expect(object["signedDate"] as? Int64 == 1_698_148_950_123)
        }
        for name in ["renewal-full", "renewal-unknown"] {
            let r = try Fixture.decode(JWSRenewalInfoDecodedPayload.self, name)
            #expect(try JSONDecoder().decode(JWSRenewalInfoDecodedPayload.self, from: JSONEncoder().encode(r)) == r)
        }
        let s = try Fixture.decode(StatusResponse.self, "status-response")
        let sj = try JSONEncoder().encode(s)
        #expect(try JSONDecoder().decode(StatusResponse.self, from: sj) == s)
        let object = try #require(try JSONSerialization.jsonObject(with: sj) as? [String: Any])
        #expect(object["environment"] as? String == "Production")
        let empty = try JSONEncoder().encode(JWSTransactionDecodedPayload())
        #expect(String(decoding: empty, as: UTF8.self) == "{}")
    }

    @Test func verifyReceiptDecodesStringTypedValues() throws {
        let v = try Fixture.decode(VerifyReceiptResponse.self, "verify-receipt")
        #expect(v.status == 0)
        #expect(v.environment == "Production")
        #expect(v.latestReceipt == "TUlJVE5FV0VTVA==")
        #expect(v.isRetryable == false)
        #expect(v.receipt?.appItemId == 1_234_567_890)
        #expect(v.receipt?.receiptCreationDate == 1_698_148_800_000)
        #expect(v.receipt?.inApp?.first?.isTrialPeriod == true)
        let t = try #require(v.latestReceiptInfo?.first)
        #expect(t.transactionId == "1000000000000003")
        #expect(t.purchaseDate == 1_698_148_800_000)
        #expect(t.originalPurchaseDate == 1_690_000_000_000)
        #expect(t.expiresDate == 1_700_827_200_000)
        #expect(t.cancellationDate == 1_699_000_000_000)
        #expect(t.cancellationReason == .actualOrPerceivedIssue)
        #expect(t.isTrialPeriod == false && t.isInIntroOfferPeriod == false && t.isUpgraded == true)
        #expect(t.inAppOwnershipType == .familyShared)
        #expect(t.quantity == 1)
        #expect(t.webOrderLineItemId == "1000000080000003")
        let p = try #require(v.pendingRenewalInfo?.first)
        #expect(p.autoRenewStatus == .off)
        #expect(p.expirationIntent == .billingError)
        #expect(p.isInBillingRetryPeriod == true)
        #expect(p.gracePeriodExpiresDate == 1_701_000_000_000)
        #expect(p.priceConsentStatus == 1)
        #expect(p.priceIncreaseStatus == .customerConsentedOrWasNotifiedWithoutClaimingConsent)

        // Encoding writes Apple's string forms back.
        let json = try JSONEncoder().encode(v)
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let lri = try #require((object["latest_receipt_info"] as? [[String: Any]])?.first)
        #expect(lri["purchase_date_ms"] as? String == "1698148800000")
        #expect(lri["is_upgraded"] as? String == "true")
        let pri = try #require((object["pending_renewal_info"] as? [[String: Any]])?.first)
        #expect(pri["is_in_billing_retry_period"] as? String == "1")
        #expect(try JSONDecoder().decode(VerifyReceiptResponse.self, from: json) == v)
    }

    @Test(arguments: [
        (#"{"status": 21100, "is-retryable": true}"#, true),
        (#"{"status": 21100, "is_retryable": 1}"#, true),
        (#"{"status": 21101, "is_retryable": "0"}"#, false),
        (#"{"status": "21007"}"#, nil),
    ])
    func verifyReceiptRetryableSpellings(json: String, expected: Bool?) throws {
        let v = try JSONDecoder().decode(VerifyReceiptResponse.self, from: Data(json.utf8))
        #expect(v.isRetryable == expected)
        #expect(v.status >= 21007)
    }

    @Test func verifyReceiptRequestUsesHyphenatedKeys() throws {
        let json = try JSONEncoder().encode(VerifyReceiptRequest(receiptData: "abc", password: "s", excludeOldTransactions: true))
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        #expect(object["receipt-data"] as? String == "abc")
        #expect(object["exclude-old-transactions"] as? Bool == true)
        #expect(object["password"] as? String == "s")
    }

    /// One type, one rounding: a `Date` made from Apple's milliseconds gives them back exactly,
    /// including moments whose `Date` multiplies back to a hair below the integer (a truncating
    /// conversion moved those one millisecond earlier).
    @Test("milliseconds round-trip through Date exactly", arguments: [
        Int64(1_096_484_645_751), 2_159_836_788_069, 211_459_841_331, 1_698_148_950_123, 0,
    ])
    func millisecondsRoundTrip(_ ms: Int64) {
        #expect(EpochMilliseconds(EpochMilliseconds(ms).date).rawValue == ms)
    }

    @Test("the round trip is exact where the product falls below the integer")
    func millisecondsBelowTheInteger() {
        let product = EpochMilliseconds(1_096_484_645_751).date.timeIntervalSince1970 * 1000
        #expect(product < 1_096_484_645_751)
        #expect(EpochMilliseconds(Date(timeIntervalSince1970: product / 1000)).rawValue == 1_096_484_645_751)
    }
}
