/// The simulated app's products: two subscription groups with weekly, monthly and yearly
/// products at several service levels (level 1 is the highest, as in App Store Connect).
public struct Catalog: Sendable {
    public enum Unit: UInt8, Sendable {
        case week, month, year

        /// ISO 8601 duration of one period.
        public var isoPeriod: String {
            switch self {
            case .week: "P1W"
            case .month: "P1M"
            case .year: "P1Y"
            }
        }
    }

    public struct Product: Sendable {
        public let id: String
        /// Index into ``Catalog/groups``.
        public let group: Int
        /// Service level inside the group; 1 is the highest.
        public let level: Int
        public let unit: Unit
        /// Price in milliunits of USD before any price increase.
        public let basePrice: Int64
        /// Weight when a new subscriber in this group picks a product.
        public let weight: Double
    }

    public struct Group: Sendable {
        public let id: String
        public let name: String
    }

    public let groups: [Group]
    public let products: [Product]
    /// Products whose price rises during the simulation (a campaign; consent required mostly).
    public let priceIncreaseProducts: Set<Int>
    /// A product removed from sale during the simulation (renewals into it fail with intent 4).
    public let discontinuedProduct: Int

    public static let standard = Catalog(
        groups: [
            Group(id: "21500001", name: "premium"),
            Group(id: "21500002", name: "storage"),
        ],
        products: [
            Product(id: "sim.premium.ultimate.monthly", group: 0, level: 1, unit: .month, basePrice: 14990, weight: 8),
            Product(id: "sim.premium.ultimate.yearly", group: 0, level: 1, unit: .year, basePrice: 119_990, weight: 5),
            Product(id: "sim.premium.standard.weekly", group: 0, level: 2, unit: .week, basePrice: 2990, weight: 14),
            Product(id: "sim.premium.standard.monthly", group: 0, level: 2, unit: .month, basePrice: 9990, weight: 40),
            Product(id: "sim.premium.standard.yearly", group: 0, level: 2, unit: .year, basePrice: 79990, weight: 25),
            Product(id: "sim.premium.lite.monthly", group: 0, level: 3, unit: .month, basePrice: 4990, weight: 8),
            Product(id: "sim.storage.2tb.monthly", group: 1, level: 1, unit: .month, basePrice: 9990, weight: 15),
            Product(id: "sim.storage.200gb.monthly", group: 1, level: 2, unit: .month, basePrice: 2990, weight: 45),
            Product(id: "sim.storage.200gb.yearly", group: 1, level: 2, unit: .year, basePrice: 29990, weight: 15),
            Product(id: "sim.storage.50gb.monthly", group: 1, level: 3, unit: .month, basePrice: 990, weight: 25),
        ],
        priceIncreaseProducts: [3, 7],
        discontinuedProduct: 5
    )

    /// Products of a group, by index.
    public func products(inGroup g: Int) -> [Int] {
        products.indices.filter { products[$0].group == g }
    }

    /// Index of a product id.
    public func index(of productId: String) -> Int? {
        products.firstIndex { $0.id == productId }
    }

    /// Price in milliunits at a price tier (each tier is +15 %, rounded to 10 milliunits).
    public func price(product: Int, tier: Int) -> Int64 {
        var p = products[product].basePrice
        for _ in 0..<tier { p = (p * 115 / 100 + 5) / 10 * 10 }
        return p
    }

    /// Win-back offers a churned subscriber of a group may redeem, best first.
    public func winBackOffers(group: Int) -> [String] {
        ["sim.winback.\(groups[group].name).1month-free", "sim.winback.\(groups[group].name).50off"]
    }
}
