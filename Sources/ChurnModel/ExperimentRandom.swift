import Foundation

/// A seeded pseudo-random generator for the experiments' Monte Carlo (Thompson sampling, the
/// estimator's probability of being best, simulations in tests): the same seed gives the same
/// draws in every process, on every machine and in every Swift version (the standard library's
/// `SystemRandomNumberGenerator` cannot be seeded, and its algorithms are not a contract).
///
/// The generator is xoshiro256** (Blackman & Vigna 2018): 256 bits of state, period 2^256 − 1,
/// passes BigCrush. Its four state words are filled from the 64-bit seed by SplitMix64 (Steele,
/// Lea & Flood 2014), as its authors recommend, so that similar seeds (0, 1, 2…) give unrelated
/// streams and the state is never all zeros. Reference: seed 0 gives 0x99ec5f36cb75f2b4 first.
///
/// Not for security: the draws are predictable from the seed, which is the point.
public struct ExperimentRandom: Sendable, RandomNumberGenerator {
    private var s0: UInt64, s1: UInt64, s2: UInt64, s3: UInt64

    public init(seed: UInt64) {
        var state = seed
        s0 = Self.splitMix(&state)
        s1 = Self.splitMix(&state)
        s2 = Self.splitMix(&state)
        s3 = Self.splitMix(&state)
    }

    /// The next 64 random bits (xoshiro256**).
    public mutating func next() -> UInt64 {
        let result = Self.rotate(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = Self.rotate(s3, 45)
        return result
    }

    /// Uniform in the OPEN interval (0, 1): the top 53 bits k give (k + ½)·2⁻⁵³, the midpoints
    /// of 2⁵³ equal cells, so neither 0 nor 1 ever comes out (`log(unit())` is always finite).
    public mutating func unit() -> Double {
        (Double(next() >> 11) + 0.5) * 0x1p-53
    }

    /// A standard normal draw (mean 0, variance 1) by the Box–Muller transform: with U₁, U₂
    /// uniform on (0, 1), √(−2 ln U₁)·cos(2πU₂) is standard normal. The transform's second
    /// normal (the sine) is not kept, so the generator stays four words with no cache.
    public mutating func normal() -> Double {
        let radius = (-2 * log(unit())).squareRoot()
        return radius * cos(2 * Double.pi * unit())
    }

    /// A Gamma(shape, 1) draw (mean = variance = shape), by Marsaglia & Tsang (2000).
    ///
    /// For shape a ≥ 1: let d = a − ⅓, c = 1/√(9d); draw X standard normal, V = (1 + cX)³
    /// (reject V ≤ 0) and U uniform; accept dV when U < 1 − 0.0331·X⁴ (a cheap squeeze that
    /// takes ~98 % of draws) or when ln U < X²/2 + d(1 − V + ln V) (the exact test). The accepted
    /// dV is Gamma(a); fewer than 5 % of draws are rejected for any a ≥ 1.
    ///
    /// For 0 < a < 1 (the "boost"): if G ~ Gamma(a + 1) and U ~ Uniform(0, 1) independent, then
    /// G·U^(1/a) ~ Gamma(a). For very small a that product can underflow to 0.
    ///
    /// - Precondition: `shape > 0` and finite.
    public mutating func gamma(shape: Double) -> Double {
        precondition(shape > 0 && shape.isFinite, "gamma shape must be positive and finite, not \(shape)")
        if shape < 1 {
            return gamma(shape: shape + 1) * pow(unit(), 1 / shape)
        }
        let d = shape - 1.0 / 3.0
        let c = 1 / (9 * d).squareRoot()
        while true {
            let x = normal()
            let root = 1 + c * x
            guard root > 0 else { continue }
            let v = root * root * root
            let u = unit()
            let x2 = x * x
            if u < 1 - 0.0331 * x2 * x2 { return d * v }
            if log(u) < 0.5 * x2 + d * (1 - v + log(v)) { return d * v }
        }
    }

    /// A Beta(a, b) draw, as X/(X + Y) with X ~ Gamma(a), Y ~ Gamma(b) independent.
    /// Mean a/(a + b), variance ab/((a + b)²(a + b + 1)).
    ///
    /// When both gammas underflow to 0 (only for shapes far below 1), the draw is 1 with
    /// probability a/(a + b) and 0 otherwise: the limit of Beta(a, b) as the shapes shrink.
    ///
    /// - Precondition: `a > 0`, `b > 0`, both finite.
    public mutating func beta(_ a: Double, _ b: Double) -> Double {
        let x = gamma(shape: a), y = gamma(shape: b)
        let sum = x + y
        guard sum > 0 else { return unit() < a / (a + b) ? 1 : 0 }
        return x / sum
    }

    /// A seed made from a name and a number, the same everywhere: FNV-1a (64 bits) of `text`'s
    /// UTF-8 bytes, combined with `n` through SplitMix64's finalizer (a bijective 64-bit mixer).
    /// Use `seed(experimentName, allocationNumber)` so that an allocation's draws can be
    /// replayed from the experiment's name and the allocation period it started.
    public static func seed(_ text: String, _ n: Int) -> UInt64 {
        let name = FNV1a.hash(text)
        let number = mix(UInt64(bitPattern: Int64(n)) &+ 0x9E37_79B9_7F4A_7C15)
        return mix(name ^ number)
    }

    /// SplitMix64: advance the state by the golden-ratio increment, return its mixed value.
    private static func splitMix(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return mix(state)
    }

    /// SplitMix64's finalizer (Stafford's variant 13): a bijection of UInt64 with good avalanche.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private static func rotate(_ x: UInt64, _ k: UInt64) -> UInt64 {
        (x << k) | (x >> (64 - k))
    }
}
