import Synchronization
import NIOCore

/// The signed status item of each subscriber at one simulated moment, so serving Get All
/// Subscription Statuses again is a lookup. Bounded (first in, first out) and sharded by
/// subscriber to keep lock contention low.
final class SignedCache: Sendable {
    /// One subscriber's signed status item, compact: the payload JSON and raw signatures (the
    /// shared header and the base64url text are produced when serving), about 1.3 KB.
    struct Item: Sendable {
        enum Chain: UInt8, Sendable {
            /// Signed by the simulator's chain.
            case main
            /// Signed by the rogue chain.
            case rogue
            /// `data` holds the two JWS strings as served (truncated faults).
            case literal
        }

        /// Simulated moment the payloads were signed at; an entry is valid only for it.
        var at: Int64
        var status: Int32
        var chain: Chain
        var renewalLength: UInt16
        var transactionLength: UInt16
        /// Renewal payload, transaction payload, then (unless literal) the two 64-byte signatures.
        var data: [UInt8]
    }

    private struct Shard {
        var items: [Int32: Item] = [:]
        var order: [Int32] = []
        var head = 0
    }

    /// A shard behind its own lock (a class, since a `Mutex` cannot sit in an array).
    private final class LockedShard: Sendable {
        let shard = Mutex(Shard())
    }

    private let shards: [LockedShard]
    private let perShard: Int

    init(capacity: Int, shards count: Int = 16) {
        shards = (0..<count).map { _ in LockedShard() }
        perShard = max(1, capacity / count)
    }

    func get(_ subscriber: Int, at: Int64) -> Item? {
        shards[subscriber % shards.count].shard.withLock { s in
            guard let item = s.items[Int32(subscriber)], item.at == at else { return nil }
            return item
        }
    }

    /// Forgets a subscriber's item (its timeline changed).
    func remove(_ subscriber: Int) {
        shards[subscriber % shards.count].shard.withLock { s in s.items[Int32(subscriber)] = nil }
    }

    func put(_ subscriber: Int, _ item: Item) {
        shards[subscriber % shards.count].shard.withLock { s in
            let key = Int32(subscriber)
            if s.items.updateValue(item, forKey: key) != nil { return }
            s.order.append(key)
            if s.items.count > perShard {
                s.items[s.order[s.head]] = nil
                s.head += 1
                if s.head > 4096 {
                    s.order.removeFirst(s.head)
                    s.head = 0
                }
            }
        }
    }
}
