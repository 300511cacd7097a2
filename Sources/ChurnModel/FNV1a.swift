/// FNV-1a, 64 bits: a hash of bytes that is the same in every process and on every machine
/// (Swift's `Hasher` is seeded per process). For splitting work and naming lists, not security.
public struct FNV1a: Sendable {
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    public init() {}

    public mutating func add<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes { value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    }

    /// The hash of `text`'s UTF-8 bytes.
    public static func hash(_ text: String) -> UInt64 {
        var h = FNV1a()
        h.add(text.utf8)
        return h.value
    }
}
