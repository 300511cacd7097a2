/// An amount as Apple signs it (milliunits: 9,990 is 9.99) printed in its currency's own minor
/// units (ISO 4217): `JPY 1490`, `USD 9.99`, `KWD 2.990`. Apple's prices are whole in their
/// minor units; an amount that is not (a sum of discounted prices) is rounded half away from zero.
public enum CurrencyAmount {
    /// ISO 4217 currencies without minor units (the others Apple sells in have two, but these three).
    static let noDecimals: Set<String> = ["BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI",
                                          "VND", "VUV", "XAF", "XOF", "XPF"]
    static let threeDecimals: Set<String> = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"]

    /// The digits after the point in `currency` (2 when unknown or nil).
    public static func minorUnits(_ currency: String?) -> Int {
        guard let c = currency?.uppercased() else { return 2 }
        if noDecimals.contains(c) { return 0 }
        return threeDecimals.contains(c) ? 3 : 2
    }

    /// `milliunits` with the currency's minor units, `grouping` thousands with commas: `1,234.50`.
    public static func format(milliunits: Int64, currency: String?, grouping: Bool = false) -> String {
        let digits = minorUnits(currency)
        let scale: Int64 = digits == 0 ? 1000 : digits == 2 ? 10 : 1
        let magnitude = milliunits.magnitude
        let minor = (magnitude + UInt64(scale / 2)) / UInt64(scale)
        let perUnit: UInt64 = digits == 0 ? 1 : digits == 2 ? 100 : 1000
        var whole = String(minor / perUnit)
        if grouping {
            var out = ""
            for (i, ch) in whole.reversed().enumerated() {
                if i > 0, i % 3 == 0 { out.append(",") }
                out.append(ch)
            }
            whole = String(out.reversed())
        }
        let sign = milliunits < 0 && minor > 0 ? "-" : ""
        guard digits > 0 else { return sign + whole }
        let fraction = String(minor % perUnit)
        return sign + whole + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
}
