import Synchronization

/// Every simulated subscription and its timeline, generated once from a ``PopulationConfig``.
/// Immutable after generation except for redeemed offers (``redeemOffer(_:at:effect:offerId:effectByOffer:)``),
/// answers to refund requests (``answerConsumption(_:transaction:at:info:effect:)``) and
/// cancellations the cancel page averted (`avertCancellation`), which replace a timeline from a
/// moment on, under a lock; shared freely across threads.
public final class Population: Sendable {
    public let config: PopulationConfig
    public let catalog: Catalog
    public let records: [SubscriberRecord]
    /// All timelines, back to back; a record's range points into it.
    let events: [TimelineEvent]
    /// Timelines changed by redeemed offers or answers (they replace the generated ones), the
    /// redemptions and the answers.
    let revisions = Mutex(TimelineRevisions())

    /// Base of the numeric ids: subscription i of app 1 owns `base + i*1000 ..< base + i*1000 + 1000`.
    public static let originalIdBase: Int64 = 200_000_000_000_000
    /// How far apart the ids of two apps are: app k's ids (transaction, web order line item, app
    /// transaction) are app 1's plus (k - 1) × stride. One app's range is `subscribers × 1000`
    /// (at most 10^10 for 10 million subscribers), so the apps' ids never meet.
    public static let appIdStride: Int64 = 100_000_000_000
    /// This app's offset, (app - 1) × ``appIdStride``.
    let idOffset: Int64
    static let webOrderBase: Int64 = 300_000_000_000_000
    static let appTransactionBase: Int64 = 700_000_000_000_000

    public init(config: PopulationConfig, catalog: Catalog = .standard) {
        precondition(config.app >= 1 && Int64(config.subscribers) * 1000 <= Population.appIdStride)
        self.config = config
        self.catalog = catalog
        idOffset = Int64(config.app - 1) * Population.appIdStride
        let generator = PopulationGenerator(config: config, catalog: catalog)
        var records: [SubscriberRecord] = []
        records.reserveCapacity(config.subscribers)
        var events: [TimelineEvent] = []
        events.reserveCapacity(config.subscribers * 24)
        for i in 0..<config.subscribers {
            var (record, timeline) = generator.generate(i)
            record.firstEvent = UInt32(events.count)
            record.eventCount = UInt32(timeline.count)
            events.append(contentsOf: timeline)
            records.append(record)
        }
        self.records = records
        self.events = events
    }

    public var count: Int { records.count }

    /// The timeline of subscription `i`.
    public func timeline(_ i: Int) -> ArraySlice<TimelineEvent> {
        if let revised = revisions.withLock({ $0.timelines[i] }) { return revised[...] }
        let r = records[i]
        return events[Int(r.firstEvent)..<Int(r.firstEvent + r.eventCount)]
    }

    /// Total number of timeline events (for memory accounting).
    public var eventCount: Int { events.count }

    // MARK: Identifiers

    public func originalTransactionId(_ i: Int) -> String { String(Population.originalIdBase + idOffset + Int64(i) * 1000) }

    /// The id of the subscription's `k`-th transaction (k = 0 is the original purchase).
    public func transactionId(_ i: Int, _ k: Int) -> String {
        String(Population.originalIdBase + idOffset + Int64(i) * 1000 + Int64(k))
    }

    public func webOrderLineItemId(_ i: Int, _ k: Int) -> String {
        String(Population.webOrderBase + idOffset + Int64(i) * 1000 + Int64(k))
    }

    /// The subscription and transaction an id names, or nil when it is not one of this app's.
    public func locate(transactionId: String) -> (subscriber: Int, transaction: Int)? {
        let base = Population.originalIdBase + idOffset
        guard let v = Int64(transactionId), v >= base else { return nil }
        let offset = v - base
        let i = offset / 1000
        guard i < Int64(records.count) else { return nil }
        return (Int(i), Int(offset % 1000))
    }

    /// The customer (the first of a pair) a subscription belongs to.
    public func customer(_ i: Int) -> Int {
        let p = Int(records[i].partner)
        return p >= 0 ? min(i, p) : i
    }

    /// The subscriptions of the customer that owns `i`, in group order.
    public func customerSubscriptions(_ i: Int) -> [Int] {
        let p = Int(records[i].partner)
        guard p >= 0 else { return [i] }
        return records[i].group < records[p].group ? [i, p] : [p, i]
    }

    public func appTransactionId(_ i: Int) -> String {
        String(Population.appTransactionBase + idOffset + Int64(customer(i)))
    }

    /// The customer's `appAccountToken` (a UUID, lowercase), or nil when the app set none.
    public func appAccountToken(_ i: Int) -> String? {
        guard records[i].flags.contains(.accountToken) else { return nil }
        var r = SimRandom(config.seed, UInt64(customer(i)), 7)
        let a = r.next(), b = r.next()
        func hex(_ v: UInt64, _ digits: Int) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: max(0, digits - s.count)) + s
        }
        let timeLow = hex(a >> 32, 8)
        let timeMid = hex((a >> 16) & 0xFFFF, 4)
        let version = hex(0x4000 | (a & 0x0FFF), 4)
        let variant = hex(0x8000 | ((b >> 48) & 0x3FFF), 4)
        let node = hex(b & 0xFFFF_FFFF_FFFF, 12)
        return "\(timeLow)-\(timeMid)-\(version)-\(variant)-\(node)"
    }

    /// The app's own customer reference, or nil.
    public func customerRef(_ i: Int) -> String? {
        guard records[i].flags.contains(.customerRef) else { return nil }
        let c = String(customer(i))
        return "cust-" + String(repeating: "0", count: max(0, 7 - c.count)) + c
    }

    public func environment(_ i: Int) -> String {
        records[i].flags.contains(.sandbox) ? "Sandbox" : "Production"
    }

    public func isSandbox(_ i: Int) -> Bool { records[i].flags.contains(.sandbox) }

    public func groupId(_ i: Int) -> String { catalog.groups[Int(records[i].group)].id }

    /// Legacy receipt data of the customer (Base64 of an opaque blob), or nil.
    public func receiptData(_ i: Int) -> String? {
        guard records[i].flags.contains(.receipt) else { return nil }
        let c = customer(i)
        var r = SimRandom(config.seed, UInt64(c), 8)
        let blob = "appstore-sim receipt v1 \(environment(i)) \(originalTransactionId(c)) \(String(r.next(), radix: 16))"
        return base64(Array(blob.utf8))
    }

    /// The subscription a receipt blob names, or nil when it is not a receipt of ours.
    public func subscriber(forReceipt base64Text: String) -> Int? {
        guard let bytes = Population.decodeBase64(base64Text) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ")
        guard parts.count == 6, parts[0] == "appstore-sim", parts[1] == "receipt",
            let loc = locate(transactionId: String(parts[4])), loc.transaction == 0,
            receiptData(loc.subscriber) == base64Text
        else { return nil }
        return loc.subscriber
    }

    private func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(table[Int(b0 >> 2)])
            out.append(table[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? table[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? table[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decodeBase64(_ text: String) -> [UInt8]? {
        var map = [UInt8](repeating: 255, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            map[Int(c)] = UInt8(i)
        }
        let chars = Array(text.utf8).filter { $0 != UInt8(ascii: "=") && $0 != 10 && $0 != 13 }
        guard chars.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        var acc: UInt32 = 0
        var bits = 0
        for c in chars {
            let v = map[Int(c)]
            guard v != 255 else { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((acc >> UInt32(bits)) & 0xFF))
            }
        }
        return out
    }
}
