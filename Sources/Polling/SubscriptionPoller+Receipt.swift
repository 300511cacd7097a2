import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation

extension SubscriptionPoller {
    // MARK: Legacy verifyReceipt

    /// Polls through Apple's deprecated verifyReceipt: only for a subscriber registered with a
    /// receipt alone (its id is learned here, and the row re-keyed to it, so the next poll goes
    /// through the Server API), and as the fallback when the Server API knows the id in neither
    /// environment. Sends `exclude-old-transactions` (the newest transaction per subscription is
    /// all this needs). A receipt of another app (its `bundle_id` is not APPSTORE_BUNDLE_ID)
    /// changes nothing: the poll fails and the receipt goes to quarantine.
    func pollReceipt(_ item: ClaimedItem, receipt: String, asOf: Date) async -> Result {
        let outcome = await client.verifyReceipt(receipt, excludeOldTransactions: true)
        let calls: [AppStoreEndpoint: Int] = [.verifyReceipt: 1]
        guard case .success(let result) = outcome else {
            return failure(item, outcome, endpoint: .verifyReceipt, calls: calls)
        }
        let bundleId = client.configuration.bundleId
        guard result.response.receipt?.bundleId == bundleId else {
            let why = "receipt of another app: bundle_id \(result.response.receipt?.bundleId.map { "\"\($0.prefix(100))\"" } ?? "missing"), not \(bundleId)"
            return Result(write: PollWrite(item: item, outcome: .failed(.verification, reason: "verification: \(why)"),
                                           quarantine: [QuarantinedPayload(endpoint: AppStoreEndpoint.verifyReceipt.rawValue, reason: why, payload: receipt)]),
                          failure: .subscription, calls: calls)
        }
        let environment = result.environment
        // The facts keep Apple's raw text, as its payloads do.
        let all = (result.response.latestReceiptInfo ?? []).compactMap { TransactionFacts(legacy: $0, environment: environment.rawValue) }
        let learning = ReceiptRegistration.isPlaceholder(item.originalTransactionId)
        // A receipt alone: the subscription is the receipt's newest one (a receipt holds every
        // subscription of the customer in the app).
        let otid = learning ? Self.newestSubscription(in: all) ?? item.originalTransactionId : item.originalTransactionId
        guard let latest = SubscriptionSnapshot.latestTransaction(of: otid, in: all) else {
            let what = learning ? "no subscription" : "no transaction of \(otid)"
            return Result(write: PollWrite(item: item, outcome: .failed(.notFound, reason: "not found: the receipt has \(what)")),
                          failure: .subscription, calls: calls)
        }
        let pending = (result.response.pendingRenewalInfo ?? []).first { $0.originalTransactionId == otid }
            .map { RenewalFacts(legacy: $0, originalTransactionId: otid, environment: environment.rawValue) }
            ?? RenewalFacts.legacyCancelledDuringBillingTrouble(previous: item.snapshot, transaction: latest, asOf: asOf)
        let mine = all.filter { $0.originalTransactionId == otid }
        let snapshot = SubscriptionSnapshot(status: nil, transaction: latest, renewal: pending, history: mine, asOf: asOf)
        let records = (result.response.latestReceiptInfo ?? []).filter { $0.originalTransactionId == otid }.compactMap { t in
            TransactionFacts(legacy: t, environment: environment.rawValue).map { TransactionRecord(facts: $0, payload: Self.json(t)) }
        }
        var write = decide(item, snapshot: snapshot, environment: environment, revision: nil,
                           receiptLatest: result.latestReceipt, records: records, asOf: asOf)
        if learning { write.learnedOriginalTransactionId = otid }
        return Result(write: write, failure: nil, calls: calls)
    }

    /// The original transaction id of the receipt's newest transaction (latest expiry, then
    /// purchase).
    static func newestSubscription(in transactions: [TransactionFacts]) -> String? {
        transactions.max { a, b in
            (a.expiresDate ?? .distantPast, a.purchaseDate ?? .distantPast) < (b.expiresDate ?? .distantPast, b.purchaseDate ?? .distantPast)
        }?.originalTransactionId
    }
}
