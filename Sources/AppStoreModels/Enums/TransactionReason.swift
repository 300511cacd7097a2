/// Whether the customer (purchase) or Apple (renewal) initiated a transaction (`transactionReason`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum TransactionReason: String, Codable, Hashable, Sendable, CaseIterable {
    case purchase = "PURCHASE"
    case renewal = "RENEWAL"
}
