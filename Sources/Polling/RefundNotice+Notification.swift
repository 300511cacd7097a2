import AppStoreServerAPI
import ChurnStore
import Foundation

extension RefundNotice {
    /// What a verified notification says about a refund request: a `CONSUMPTION_REQUEST` (the
    /// transaction the customer wants back, its period, Apple's reason) or a decision on one
    /// (`REFUND`, `REFUND_DECLINED`); nil for anything else, or without the transaction's ids.
    init?(_ v: VerifiedNotification, uuid: UUID) {
        guard let tx = v.transaction, let txid = tx.transactionId, let otid = v.originalTransactionId else { return nil }
        switch v.notificationType {
        case "CONSUMPTION_REQUEST":
            self = .request(RefundRequestNotice(
                notificationUUID: uuid, originalTransactionId: otid, transactionId: txid, environment: v.environment,
                reason: v.payload.data?.rawConsumptionRequestReason, requestedAt: v.signedDate.date,
                periodStart: tx.purchaseDate?.date, periodEnd: tx.expiresDate?.date))
        case "REFUND":
            self = .decision(transactionId: txid, originalTransactionId: otid, decision: .refunded, at: v.signedDate.date)
        case "REFUND_DECLINED":
            self = .decision(transactionId: txid, originalTransactionId: otid, decision: .declined, at: v.signedDate.date)
        default:
            return nil
        }
    }
}
