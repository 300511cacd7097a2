import Foundation
@testable import AppStoreSimulator

/// Digests of everything a seed generates (timelines, truth, events, notifications), to compare a
/// population with what the simulator generated before refund requests were modelled.
enum GoldenDigest {
    static let start = PopulationConfig.defaultStart

    /// FNV-1a over text.
    struct Hash {
        private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325
        mutating func add(_ s: String) {
            for b in s.utf8 { value = (value ^ UInt64(b)) &* 0x100_0000_01B3 }
            value = (value ^ 10) &* 0x100_0000_01B3
        }
        mutating func add(_ bytes: [UInt8]) {
            for b in bytes { value = (value ^ UInt64(b)) &* 0x100_0000_01B3 }
        }
    }

    /// The notification options the digests use (every draw exercised).
    static var options: NotificationOptions {
        var o = NotificationOptions()
        o.unnotifiedShare = 0.1
        o.failedDeliveryShare = 0.2
        return o
    }

    /// Timelines: every event, except those `skip` names.
    static func timelines(_ p: Population, skip: (TimelineEvent) -> Bool = { _ in false }) -> UInt64 {
        var h = Hash()
        for i in 0..<p.count {
            h.add("s\(i)")
            for e in p.timeline(i) where !skip(e) { h.add("\(e.time) \(e.kind.rawValue) \(e.a) \(e.b) \(e.c) \(e.d)") }
        }
        return h.value
    }

    /// `/_sim/truth` at three moments.
    static func truth(_ p: Population) -> UInt64 {
        var h = Hash()
        for day in [0, 30, 200] as [Int64] { h.add(TruthReport.truth(p, at: start + day * SimTime.day, fault: { _ in nil })) }
        return h.value
    }

    /// Every true event with its notification, except events whose name `skip` says.
    static func events(_ p: Population, skip: (String) -> Bool = { _ in false }) -> UInt64 {
        var h = Hash()
        let o = options
        for e in p.truthEvents(from: start - 800 * SimTime.day, to: start + 400 * SimTime.day) where !skip(e.kind.rawValue) {
            let uuid = p.isNotified(e.subscriber, e.eventIndex, options: o) ? p.notificationUUID(e.subscriber, e.eventIndex) : "-"
            let details = e.details.map { d -> String in
                switch d.value {
                case .string(let v): "\(d.key)=\(v)"
                case .int(let v): "\(d.key)=\(v)"
                }
            }
            h.add("\(e.subscriber) \(e.time) \(e.kind.rawValue) \(details.joined(separator: ",")) \(uuid)")
        }
        return h.value
    }

    /// Every notification: type, subtype, UUID, whether sent, delivery attempts; except types `skip` names.
    static func notifications(_ p: Population, skip: (String) -> Bool = { _ in false }) -> UInt64 {
        var h = Hash()
        let o = options, end = start + 400 * SimTime.day
        for i in 0..<p.count {
            for k in 0..<p.timeline(i).count {
                let n = p.notification(i, k)
                guard !skip(n.type) else { continue }
                let attempts = p.sendAttempts(i, k, at: n.time, now: end, options: o).map { "\($0.date)\($0.result)" }.joined(separator: ",")
                h.add("\(i) \(n.time) \(n.type) \(n.subtype ?? "-") \(p.notificationUUID(i, k)) \(p.isNotified(i, k, options: o)) \(attempts)")
            }
        }
        return h.value
    }
}
