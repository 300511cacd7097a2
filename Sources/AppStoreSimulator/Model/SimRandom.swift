/// A small deterministic generator (SplitMix64). The population is generated from it so the same
/// seed gives the same subscribers on every platform and Swift version (the standard library's
/// generators promise neither).
public struct SimRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// A stream derived from a seed and any number of integer labels (subscriber index, purpose).
    public init(_ seed: UInt64, _ labels: UInt64...) {
        var s = SimRandom.mix(seed ^ 0x9E37_79B9_7F4A_7C15)
        for l in labels { s = SimRandom.mix(s ^ SimRandom.mix(l &+ 0x632B_E59B_D9B4_E019)) }
        state = s
    }

    /// The SplitMix64 finalizer: a good 64-bit hash of one word.
    public static func mix(_ z0: UInt64) -> UInt64 {
        var z = z0
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return SimRandom.mix(state)
    }

    /// Uniform in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// `true` with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { unit() < p }

    /// Uniform integer in `range`.
    public mutating func int(_ range: ClosedRange<Int64>) -> Int64 {
        let span = UInt64(range.upperBound - range.lowerBound) &+ 1
        if span == 0 { return Int64(bitPattern: next()) }
        return range.lowerBound + Int64(next() % span)
    }

    /// Uniform duration in [lo, hi) milliseconds (lo when the range is empty).
    public mutating func between(_ lo: Int64, _ hi: Int64) -> Int64 {
        hi <= lo ? lo : lo + Int64(next() % UInt64(hi - lo))
    }

    /// An index chosen with the given (not necessarily normalized) weights.
    public mutating func weighted(_ weights: [Double]) -> Int {
        let total = weights.reduce(0, +)
        var x = unit() * total
        for (i, w) in weights.enumerated() {
            if x < w { return i }
            x -= w
        }
        return weights.count - 1
    }
}
