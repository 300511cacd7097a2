/// The fixed facts about one subscription; its timeline lives in ``Population``'s shared event
/// array at `firstEvent ..< firstEvent + eventCount`.
public struct SubscriberRecord: Sendable, Hashable {
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let sandbox = Flags(rawValue: 1)
        public static let familyShared = Flags(rawValue: 2)
        /// The customer has legacy receipt data (verifyReceipt).
        public static let receipt = Flags(rawValue: 4)
        /// The app set an `appAccountToken`.
        public static let accountToken = Flags(rawValue: 8)
        /// The app knows its own customer reference.
        public static let customerRef = Flags(rawValue: 16)
    }

    public var firstEvent: UInt32
    public var eventCount: UInt32
    /// The customer's subscription in the other group, or -1.
    public var partner: Int32
    public var group: UInt8
    public var flags: Flags
    public var storefront: UInt8
}

/// Storefronts subscribers buy in.
public enum Storefronts {
    public static let all: [(code: String, id: String, currency: String, weight: Double)] = [
        ("USA", "143441", "USD", 50), ("GBR", "143444", "GBP", 12), ("DEU", "143443", "EUR", 12),
        ("FRA", "143442", "EUR", 8), ("JPN", "143462", "JPY", 8), ("CAN", "143455", "CAD", 10),
    ]

    /// A catalog price (US dollars, milliunits) as the storefront's own price: Apple's price
    /// points differ per storefront, in the currency's own units. Euros and pounds keep the
    /// number (as Apple's equalized points roughly do, taxes included), Canadian dollars are
    /// 1.4 times it ending in .99, yen 150 times it in whole tens of yen (9.99 → ¥1,500).
    public static func localPrice(_ usdMilliunits: Int64, storefront: Int) -> Int64 {
        switch all[storefront].currency {
        case "JPY": return max(10_000, (usdMilliunits * 150 + 5_000) / 10_000 * 10_000)
        case "CAD": return max(990, (usdMilliunits * 14 / 10 + 500) / 1_000 * 1_000 - 10)
        default: return usdMilliunits
        }
    }
}
