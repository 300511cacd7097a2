/// Counters behind `/_sim/stats`.
struct SimStats {
    /// endpoint → HTTP status → count.
    var requests: [String: [Int: Int]] = [:]
    var rateLimited = 0
    /// fault kind → count (request faults and payload faults served).
    var faults: [String: Int] = [:]
    /// auth rejection reason → count.
    var authRejections: [String: Int] = [:]
    var cacheHits = 0
    var cacheMisses = 0
    var signatures = 0

    mutating func count(_ endpoint: String, _ status: Int) {
        requests[endpoint, default: [:]][status, default: 0] += 1
    }

    func json() -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.beginObject("requests")
        for endpoint in requests.keys.sorted() {
            w.beginObject(endpoint)
            for (status, n) in requests[endpoint]!.sorted(by: { $0.key < $1.key }) { w.int(String(status), Int64(n)) }
            w.endObject()
        }
        w.endObject()
        w.int("rate_limited", Int64(rateLimited))
        w.beginObject("faults")
        for (k, n) in faults.sorted(by: { $0.key < $1.key }) { w.int(k, Int64(n)) }
        w.endObject()
        w.beginObject("auth_rejections")
        for (k, n) in authRejections.sorted(by: { $0.key < $1.key }) { w.int(k, Int64(n)) }
        w.endObject()
        w.int("cache_hits", Int64(cacheHits))
        w.int("cache_misses", Int64(cacheMisses))
        w.int("signatures", Int64(signatures))
        w.endObject()
        return w.bytes
    }
}
