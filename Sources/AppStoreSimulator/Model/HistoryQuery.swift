import AppStoreModels

/// The filters and paging of Get Transaction History v2, parsed from query parameters, and the
/// paging of Get Refund History v2. Pure: items in, one page out.
public struct HistoryQuery: Sendable, Hashable {
    public var startDate: Int64?
    public var endDate: Int64?
    public var productIds: [String] = []
    public var productTypes: [String] = []
    public var groupIds: [String] = []
    public var ownership: String?
    public var revoked: Bool?
    public var descending = false

    public static let pageSize = 20

    public init() {}

    /// Parses Apple's query parameters (repeatable ones may repeat); returns the query and the
    /// revision, or Apple's 400 error for a bad value.
    public static func parse(_ items: [(String, String)]) throws(AppleError) -> (HistoryQuery, String?) {
        var q = HistoryQuery()
        var revision: String?
        for (k, v) in items {
            switch k {
            case "revision": revision = v
            case "startDate":
                guard let d = Int64(v), d >= 0 else { throw AppleError(400, 4_000_015, "Invalid start date.") }
                q.startDate = d
            case "endDate":
                guard let d = Int64(v), d >= 0 else { throw AppleError(400, 4_000_016, "Invalid end date.") }
                q.endDate = d
            case "productId":
                guard !v.isEmpty else { throw AppleError(400, 4_000_023, "Invalid product id.") }
                q.productIds.append(v)
            case "productType":
                guard ["AUTO_RENEWABLE", "NON_RENEWABLE", "CONSUMABLE", "NON_CONSUMABLE"].contains(v) else {
                    throw AppleError(400, 4_000_022, "Invalid product type.")
                }
                q.productTypes.append(v)
            case "subscriptionGroupIdentifier":
                guard !v.isEmpty else { throw AppleError(400, 4_000_024, "Invalid subscription group identifier.") }
                q.groupIds.append(v)
            case "inAppOwnershipType":
                guard v == "FAMILY_SHARED" || v == "PURCHASED" else {
                    throw AppleError(400, 4_000_026, "Invalid in-app ownership type.")
                }
                q.ownership = v
            case "sort":
                guard v == "ASCENDING" || v == "DESCENDING" else { throw AppleError(400, 4_000_021, "Invalid sort.") }
                q.descending = v == "DESCENDING"
            case "revoked":
                guard v == "true" || v == "false" else { throw AppleError(400, 4_000_030, "Invalid revoked.") }
                q.revoked = v == "true"
            case "excludeRevoked":
                guard v == "true" || v == "false" else { throw AppleError(400, 4_000_025, "Invalid exclude revoked.") }
                if v == "true" { q.revoked = false }
            default:
                break
            }
        }
        if let s = q.startDate, let e = q.endDate, s >= e {
            throw AppleError(400, 4_000_013, "Start date after end date.")
        }
        return (q, revision)
    }

    /// A stable hash of the filters, bound into revisions so a revision is only valid with the
    /// filters it was issued for.
    var fingerprint: UInt64 {
        var text = "\(startDate ?? -1)|\(endDate ?? -1)|\(productIds.sorted())|\(productTypes.sorted())|"
        text += "\(groupIds.sorted())|\(ownership ?? "")|\(revoked.map { $0 ? "t" : "f" } ?? "")|\(descending)"
        return HistoryQuery.fnv(text)
    }

    static func fnv(_ s: String) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in s.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01B3 }
        return h
    }

    /// An item of a customer's history: subscription, transaction, and its group and product.
    public struct Item: Sendable, Hashable {
        public var subscriber: Int
        public var transaction: SimTransaction
        public var productId: String
        public var groupId: String
        public var familyShared: Bool
    }

    func matches(_ item: Item) -> Bool {
        let tx = item.transaction
        if let s = startDate, tx.purchaseDate < s { return false }
        if let e = endDate, tx.purchaseDate >= e { return false }
        if !productIds.isEmpty && !productIds.contains(item.productId) { return false }
        if !productTypes.isEmpty && !productTypes.contains("AUTO_RENEWABLE") { return false }
        if !groupIds.isEmpty && !groupIds.contains(item.groupId) { return false }
        if let o = ownership, (o == "FAMILY_SHARED") != item.familyShared { return false }
        if let r = revoked, r != (tx.revocation != nil) { return false }
        return true
    }

    private struct Cursor: Comparable {
        var time: Int64
        var subscriber: Int
        var index: Int
        static func < (l: Cursor, r: Cursor) -> Bool {
            (l.time, l.subscriber, l.index) < (r.time, r.subscriber, r.index)
        }
    }

    private static func encode(_ fp: UInt64, _ c: Cursor) -> String {
        Base64URL.encode("\(String(fp, radix: 16)).\(c.time).\(c.subscriber).\(c.index)")
    }

    private static func decode(_ revision: String, fingerprint: UInt64) -> Cursor? {
        guard let bytes = Base64URL.decode(revision) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        let p = text.split(separator: ".")
        guard p.count == 4, UInt64(p[0], radix: 16) == fingerprint, let t = Int64(p[1]), let s = Int(p[2]),
            let i = Int(p[3])
        else { return nil }
        return Cursor(time: t, subscriber: s, index: i)
    }

    /// One page of history: items sorted by modification time (then id), after the revision.
    public func page(_ items: [Item], revision: String?) throws(AppleError) -> (items: [Item], revision: String, hasMore: Bool) {
        let fp = fingerprint
        var after: Cursor?
        if let revision {
            guard let c = HistoryQuery.decode(revision, fingerprint: fp) else { throw .invalidRevision }
            after = c
        }
        func key(_ it: Item) -> Cursor {
            Cursor(time: it.transaction.modifiedAt, subscriber: it.subscriber, index: it.transaction.index)
        }
        var sorted = items.filter(matches).sorted { key($0) < key($1) }
        if descending { sorted.reverse() }
        if let after { sorted = sorted.filter { descending ? key($0) < after : key($0) > after } }
        let page = Array(sorted.prefix(HistoryQuery.pageSize))
        let last = page.last.map(key) ?? after ?? Cursor(time: descending ? .max : .min, subscriber: 0, index: 0)
        return (page, HistoryQuery.encode(fp, last), sorted.count > page.count)
    }

    /// One page of refund history: revoked transactions by revocation date, after the revision.
    public static func refundPage(_ items: [Item], revision: String?) throws(AppleError) -> (items: [Item], revision: String, hasMore: Bool) {
        let fp = fnv("refund-history")
        var after: Cursor?
        if let revision {
            guard let c = decode(revision, fingerprint: fp) else { throw .invalidRevision }
            after = c
        }
        func key(_ it: Item) -> Cursor {
            Cursor(time: it.transaction.revocation?.date ?? 0, subscriber: it.subscriber, index: it.transaction.index)
        }
        var sorted = items.filter { $0.transaction.revocation != nil }.sorted { key($0) < key($1) }
        if let after { sorted = sorted.filter { key($0) > after } }
        let page = Array(sorted.prefix(pageSize))
        let last = page.last.map(key) ?? after ?? Cursor(time: .min, subscriber: 0, index: 0)
        return (page, encode(fp, last), sorted.count > page.count)
    }
}
