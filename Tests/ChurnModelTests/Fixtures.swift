import Foundation
@testable import ChurnModel

/// Time in days from a fixed origin (2025-06-15T15:06:40Z); no clock in tests.
func day(_ n: Double) -> Date { Date(timeIntervalSince1970: 1_750_000_000 + n * 86_400) }

/// What Apple says about one subscription at one moment, with factory defaults: a monthly
/// `pro.monthly` bought on day 0, active, auto-renew on. Tests change what matters to them.
struct Apple: Sendable {
    var status: Int? = 1
    var transaction: TransactionFacts
    var renewal: RenewalFacts?
    var history: [TransactionFacts]?
    /// Signing time of both payloads; nil means "the poll time" (Apple signs at response time).
    var signedAt: Date?

    init(product: String = "pro.monthly", purchase: Date = day(0), expires: Date = day(30)) {
        transaction = TransactionFacts(
            originalTransactionId: "1000",
            transactionId: "t1",
            webOrderLineItemId: "w1",
            bundleId: "com.example.app",
            productId: product,
            subscriptionGroupIdentifier: "G1",
            purchaseDate: purchase,
            originalPurchaseDate: day(0),
            expiresDate: expires,
            type: "Auto-Renewable Subscription",
            inAppOwnershipType: "PURCHASED",
            environment: "Production",
            transactionReason: "PURCHASE",
            price: 9_990,
            currency: "USD"
        )
        renewal = RenewalFacts(
            originalTransactionId: "1000",
            autoRenewProductId: product,
            productId: product,
            autoRenewStatus: 1,
            renewalDate: expires,
            renewalPrice: 9_990,
            currency: "USD",
            environment: "Production"
        )
    }

    func snapshot(at asOf: Date) -> SubscriptionSnapshot {
        var transaction = transaction
        var renewal = renewal
        transaction.signedDate = signedAt ?? asOf
        renewal?.signedDate = signedAt ?? asOf
        return SubscriptionSnapshot(status: status, transaction: transaction, renewal: renewal, history: history, asOf: asOf)
    }

    func with(_ change: (inout Apple) -> Void) -> Apple {
        var copy = self
        change(&copy)
        return copy
    }

    // MARK: Things that happen to a subscription

    func autoRenew(_ on: Bool) -> Apple { with { $0.renewal?.autoRenewStatus = on ? 1 : 0 } }

    /// A new period: a new transaction charged at `at`, for `days` days.
    func newPeriod(_ n: Int, at: Date, days: Double = 30, product: String? = nil, reason: String = "RENEWAL") -> Apple {
        with { a in
            let product = product ?? a.transaction.productId
            a.status = 1
            a.transaction.transactionId = "t\(n)"
            a.transaction.webOrderLineItemId = "w\(n)"
            a.transaction.productId = product
            a.transaction.purchaseDate = at
            a.transaction.expiresDate = at.addingTimeInterval(days * 86_400)
            a.transaction.transactionReason = reason
            a.transaction.offerType = nil
            a.transaction.offerIdentifier = nil
            a.transaction.offerDiscountType = nil
            a.renewal?.productId = product
            a.renewal?.autoRenewProductId = product
            a.renewal?.autoRenewStatus = 1
            a.renewal?.isInBillingRetryPeriod = nil
            a.renewal?.gracePeriodExpiresDate = nil
            a.renewal?.expirationIntent = nil
            a.renewal?.priceIncreaseStatus = nil
            a.renewal?.eligibleWinBackOfferIds = nil
            a.renewal?.renewalDate = a.transaction.expiresDate
        }
    }

    /// The renewal at the end of the period failed; Apple retries (with grace until `grace`).
    func billingFailed(grace: Date? = nil) -> Apple {
        with {
            $0.status = grace == nil ? 3 : 4
            $0.renewal?.isInBillingRetryPeriod = true
            $0.renewal?.gracePeriodExpiresDate = grace
        }
    }

    func expired(intent: Int?, winBackOffers: [String]? = nil) -> Apple {
        with {
            $0.status = 2
            $0.renewal?.autoRenewStatus = 0
            $0.renewal?.isInBillingRetryPeriod = false
            $0.renewal?.expirationIntent = intent
            $0.renewal?.eligibleWinBackOfferIds = winBackOffers
        }
    }

    func revoked(at: Date, reason: Int = 0, type: String = "REFUND_FULL") -> Apple {
        with {
            $0.status = 5
            $0.transaction.revocationDate = at
            $0.transaction.revocationReason = reason
            $0.transaction.revocationType = type
            $0.renewal?.autoRenewStatus = 0
        }
    }
}

/// A snapshot of the default subscription with one change, observed at `asOf`.
func snap(at asOf: Date = day(1), _ change: (inout Apple) -> Void = { _ in }) -> SubscriptionSnapshot {
    Apple().with(change).snapshot(at: asOf)
}
