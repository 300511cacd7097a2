import Foundation

/// The uplift of a campaign: the saved share of treated entries minus that of the holdout,
/// with a 95 % interval by Newcombe's hybrid score method (Newcombe 1998, method 10: the Wilson
/// score interval of each share, combined). It stays inside [-1, 1] and behaves with small
/// groups and shares near 0 or 1, where the Wald interval does not.
public struct UpliftEstimate: Sendable, Equatable {
    /// Treated saved share minus held-out saved share.
    public var uplift: Double
    public var low: Double
    public var high: Double
    /// Fewer than `UpliftEstimate.minimumGroup` decided entries in a group: the interval is
    /// honest but too wide to act on.
    public var tooFewToSay: Bool

    /// Decided entries per group below which `tooFewToSay` is set.
    public static let minimumGroup = 30
    /// The standard normal quantile for a two-sided 95 % interval.
    public static let z = 1.959963984540054

    /// Nil when either group has no decided entry: nothing can be said.
    public init?(treatedSaved: Int, treated: Int, heldOutSaved: Int, heldOut: Int) {
        guard treated > 0, heldOut > 0, (0...treated).contains(treatedSaved), (0...heldOut).contains(heldOutSaved) else {
            return nil
        }
        let p1 = Double(treatedSaved) / Double(treated), p2 = Double(heldOutSaved) / Double(heldOut)
        let (l1, u1) = Self.wilson(successes: treatedSaved, n: treated)
        let (l2, u2) = Self.wilson(successes: heldOutSaved, n: heldOut)
        uplift = p1 - p2
        low = max(-1, uplift - ((p1 - l1) * (p1 - l1) + (u2 - p2) * (u2 - p2)).squareRoot())
        high = min(1, uplift + ((u1 - p1) * (u1 - p1) + (p2 - l2) * (p2 - l2)).squareRoot())
        tooFewToSay = treated < Self.minimumGroup || heldOut < Self.minimumGroup
    }

    /// The Wilson score interval of a proportion (95 %).
    public static func wilson(successes: Int, n: Int) -> (low: Double, high: Double) {
        let p = Double(successes) / Double(n), nn = Double(n), z2 = z * z
        let denominator = 1 + z2 / nn
        let centre = (p + z2 / (2 * nn)) / denominator
        let half = z * (p * (1 - p) / nn + z2 / (4 * nn * nn)).squareRoot() / denominator
        return (max(0, centre - half), min(1, centre + half))
    }
}
