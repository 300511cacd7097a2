/// The body of Send Consumption Information (`PUT /inApps/v2/transactions/consumption/{transactionId}`):
/// what the developer tells Apple about a purchase whose refund a customer asked for, within 12
/// hours of the `CONSUMPTION_REQUEST` notification. Apple weighs it in its refund decision.
///
/// [ConsumptionRequest](https://developer.apple.com/documentation/appstoreserverapi/consumptionrequest)
/// Apple answers 400 `InvalidCustomerConsentedError` (4000035) unless `customerConsented` is true.
public struct ConsumptionRequest: Codable, Hashable, Sendable {
    public var customerConsented: Bool
    /// Whether a free sample or trial of the content, or information about its functionality,
    /// was provided before the purchase.
    public var sampleContentProvided: Bool
    public var deliveryStatus: DeliveryStatus
    /// Share of the purchase consumed, in milliunits (0...100000). Left out for an
    /// auto-renewable subscription with `GRANT_PRORATED` (Apple computes it); 0 when not delivered.
    public var consumptionPercentage: Int32?
    public var refundPreference: RefundPreference?

    public init(customerConsented: Bool, sampleContentProvided: Bool, deliveryStatus: DeliveryStatus,
                consumptionPercentage: Int32? = nil, refundPreference: RefundPreference? = nil) {
        self.customerConsented = customerConsented
        self.sampleContentProvided = sampleContentProvided
        self.deliveryStatus = deliveryStatus
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}

/// Whether the app delivered a purchase that works (`deliveryStatus`).
public enum DeliveryStatus: String, Codable, Hashable, Sendable, CaseIterable {
    case delivered = "DELIVERED"
    case undeliveredQualityIssue = "UNDELIVERED_QUALITY_ISSUE"
    case undeliveredWrongItem = "UNDELIVERED_WRONG_ITEM"
    case undeliveredServerOutage = "UNDELIVERED_SERVER_OUTAGE"
    case undeliveredOther = "UNDELIVERED_OTHER"
}

/// The developer's preferred outcome of a refund request (`refundPreference`).
public enum RefundPreference: String, Codable, Hashable, Sendable, CaseIterable {
    case decline = "DECLINE"
    case grantFull = "GRANT_FULL"
    case grantProrated = "GRANT_PRORATED"
}

/// Why the customer asked for a refund (`consumptionRequestReason` in a `CONSUMPTION_REQUEST`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum ConsumptionRequestReason: String, Codable, Hashable, Sendable, CaseIterable {
    case unintendedPurchase = "UNINTENDED_PURCHASE"
    case fulfillmentIssue = "FULFILLMENT_ISSUE"
    case unsatisfiedWithPurchase = "UNSATISFIED_WITH_PURCHASE"
    case legal = "LEGAL"
    case other = "OTHER"
}
