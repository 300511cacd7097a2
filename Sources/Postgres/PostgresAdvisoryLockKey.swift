/// Stable 64-bit advisory lock keys derived from names, identical in every process.
public enum PostgresAdvisoryLockKey {
    /// FNV-1a over the UTF-8 bytes of `name` (not a security hash: a stable identifier).
    public static func named(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return Int64(bitPattern: hash)
    }
}
