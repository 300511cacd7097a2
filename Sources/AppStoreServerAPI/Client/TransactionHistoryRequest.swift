import AppStoreModels

/// Filters of Get Transaction History (v2). The same filters are sent on every page.
///
/// Several values in one filter are OR-ed (the parameter is repeated); different filters are AND-ed.
public struct TransactionHistoryRequest: Hashable, Sendable {
    /// Product types as the history endpoint spells them (not as payloads do).
    public enum ProductType: String, Hashable, Sendable, CaseIterable {
        case autoRenewable = "AUTO_RENEWABLE"
        case nonRenewable = "NON_RENEWABLE"
        case consumable = "CONSUMABLE"
        case nonConsumable = "NON_CONSUMABLE"
    }

    /// Order by the transaction's last-modified time.
    public enum Order: String, Hashable, Sendable {
        case ascending = "ASCENDING"
        case descending = "DESCENDING"
    }

    /// Purchases with `purchaseDate >= startDate`.
    public var startDate: EpochMilliseconds?
    /// Purchases with `purchaseDate < endDate`.
    public var endDate: EpochMilliseconds?
    public var productIds: [String]
    public var productTypes: [ProductType]
    public var subscriptionGroupIdentifiers: [String]
    public var inAppOwnershipType: InAppOwnershipType?
    public var sort: Order?
    /// `true`: only revoked; `false`: only not revoked; `nil`: both.
    public var revoked: Bool?
    /// Deprecated by Apple in favour of ``revoked``.
    public var excludeRevoked: Bool?

    public init(
        startDate: EpochMilliseconds? = nil, endDate: EpochMilliseconds? = nil, productIds: [String] = [],
        productTypes: [ProductType] = [], subscriptionGroupIdentifiers: [String] = [],
        inAppOwnershipType: InAppOwnershipType? = nil, sort: Order? = nil, revoked: Bool? = nil,
        excludeRevoked: Bool? = nil
    ) {
        self.startDate = startDate
        self.endDate = endDate
        self.productIds = productIds
        self.productTypes = productTypes
        self.subscriptionGroupIdentifiers = subscriptionGroupIdentifiers
        self.inAppOwnershipType = inAppOwnershipType
        self.sort = sort
        self.revoked = revoked
        self.excludeRevoked = excludeRevoked
    }

    /// Query parameters in a stable order; booleans lowercase; repeated names for several values.
    public func queryItems(revision: String?) -> [(name: String, value: String)] {
        var items: [(name: String, value: String)] = []
        if let revision { items.append(("revision", revision)) }
        if let startDate { items.append(("startDate", String(startDate.rawValue))) }
        if let endDate { items.append(("endDate", String(endDate.rawValue))) }
        items += productIds.map { ("productId", $0) }
        items += productTypes.map { ("productType", $0.rawValue) }
        items += subscriptionGroupIdentifiers.map { ("subscriptionGroupIdentifier", $0) }
        if let inAppOwnershipType { items.append(("inAppOwnershipType", inAppOwnershipType.rawValue)) }
        if let sort { items.append(("sort", sort.rawValue)) }
        if let revoked { items.append(("revoked", revoked ? "true" : "false")) }
        if let excludeRevoked { items.append(("excludeRevoked", excludeRevoked ? "true" : "false")) }
        return items
    }
}
