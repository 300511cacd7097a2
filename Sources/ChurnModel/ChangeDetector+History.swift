import AppStoreModels
import Foundation

extension ChangeDetector {
    /// `refunded` events for transactions other than the current latest one that a history
    /// read reports revoked (a refund or a family-sharing revocation of an earlier period).
    ///
    /// `changed` are the transactions the read returned: with Apple's revision cursor, those
    /// added or modified since the previous read, so a revoked one among them is a revocation
    /// churnwatch has not seen. The latest transaction's own revocation is
    /// ``events(previous:current:asOf:)``'s (`detectRevocation`); a previous latest transaction
    /// already stored as revoked is not reported again. No previous snapshot (the first poll
    /// establishes the state) means no events. Each event names its transaction
    /// (`transaction_id`) and occurs at its `revocationDate` (capped at `asOf`).
    public static func earlierRevocations(
        in changed: [TransactionFacts], previous: SubscriptionSnapshot?, current: SubscriptionSnapshot, asOf: Date
    ) -> [ChurnEvent] {
        guard let previous, previous.originalTransactionId == current.originalTransactionId else { return [] }
        var seen = Set<String>()
        var events: [ChurnEvent] = []
        for t in changed where t.originalTransactionId == current.originalTransactionId {
            guard let revoked = t.revocationDate, t.transactionId != current.transactionId,
                  seen.insert(t.transactionId).inserted else { continue }
            if t.transactionId == previous.transactionId, previous.revocationDate != nil { continue }
            var details: EventDetails = [
                "transaction_id": t.transactionId, "product_id": t.productId, "scope": "earlier_transaction",
                "revocation_date": EpochMilliseconds.text(revoked),
                "latest_transaction_id": current.transactionId, "state": current.state.rawValue,
            ]
            details["revocation_reason"] = t.revocationReason.map(String.init)
            details["revocation_type"] = t.revocationType
            details["in_app_ownership_type"] = t.inAppOwnershipType
            details["period_start"] = t.purchaseDate.map(EpochMilliseconds.text)
            details["period_end"] = t.expiresDate.map(EpochMilliseconds.text)
            details["price"] = t.price.map(String.init)
            details["currency"] = t.currency
            let occurredAt = min(revoked, asOf)
            details["occurred_at_basis"] = revoked <= asOf ? "revocationDate" : "detected"
            events.append(ChurnEvent(type: .refunded, occurredAt: occurredAt, details: details))
        }
        return events.sorted { $0.occurredAt < $1.occurredAt }
    }
}
