/// Which addresses a webhook may not reach unless its endpoint allows private ones: loopback,
/// private, link-local (cloud metadata at 169.254.169.254), carrier-grade NAT, unspecified,
/// multicast and reserved ranges, in IPv4 and IPv6 (IPv4-mapped and NAT64-free forms included).
public enum NetworkAddress {
    /// The range `bytes` (4 or 16 of them) falls in, or nil when it is a public address.
    public static func privateRange(_ bytes: [UInt8]) -> String? {
        if bytes.count == 4 { return v4(bytes) }
        guard bytes.count == 16 else { return "not an IP address" }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            return v4(Array(bytes[12..<16])).map { "IPv4-mapped \($0)" }
        }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return bytes[15] == 1 ? "loopback" : "unspecified" }
        if bytes[0..<12].allSatisfy({ $0 == 0 }) { return "IPv4-compatible" }
        switch bytes[0] {
        case 0xfc, 0xfd: return "unique local"
        case 0xff: return "multicast"
        case 0xfe where bytes[1] & 0xc0 == 0x80: return "link-local"
        case 0xfe where bytes[1] & 0xc0 == 0xc0: return "site-local"
        default: break
        }
        if bytes[0] == 0x20, bytes[1] == 0x01, bytes[2] == 0x0d, bytes[3] == 0xb8 { return "documentation" }
        if bytes[0] == 0x00, bytes[1] == 0x64, bytes[2] == 0xff, bytes[3] == 0x9b { return "NAT64" }
        return nil
    }

    static func v4(_ b: [UInt8]) -> String? {
        switch (b[0], b[1]) {
        case (0, _): return "unspecified"
        case (10, _): return "private"
        case (127, _): return "loopback"
        case (169, 254): return "link-local"
        case (172, 16...31): return "private"
        case (192, 168): return "private"
        case (100, 64...127): return "carrier-grade NAT"
        case (192, 0) where b[2] == 0 || b[2] == 2: return "reserved"
        case (198, 18...19): return "benchmarking"
        case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: return "documentation"
        case (224...239, _): return "multicast"
        case (240...255, _): return "reserved"
        default: return nil
        }
    }
}
