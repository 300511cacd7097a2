import AppStoreModels
import Foundation

/// Every notification sent (or tried) for a population, in `signedDate` order: the feed Get
/// Notification History pages through. Built once per simulator from the timelines.
public struct NotificationIndex: Sendable {
    public struct Entry: Sendable, Hashable, Comparable {
        public var time: Int64
        public var subscriber: Int32
        public var index: UInt32

        public static func < (l: Entry, r: Entry) -> Bool {
            (l.time, l.subscriber, l.index) < (r.time, r.subscriber, r.index)
        }
    }

    public let entries: [Entry]

    public init(_ population: Population, options: NotificationOptions) {
        var out: [Entry] = []
        if options.hasURL {
            out.reserveCapacity(population.eventCount)
            for i in 0..<population.count {
                for k in population.notifiedChanges(i, options: options) {
                    out.append(Entry(time: population.notification(i, k).time, subscriber: Int32(i), index: UInt32(k)))
                }
            }
            out.sort()
        }
        entries = out
    }

    /// The entries of the given subscriptions only, sorted.
    public static func entries(of subs: [Int], _ population: Population, options: NotificationOptions) -> [Entry] {
        subs.flatMap { i in
            population.notifiedChanges(i, options: options).map { k in
                Entry(time: population.notification(i, k).time, subscriber: Int32(i), index: UInt32(k))
            }
        }.sorted()
    }

    /// The position of the first entry not before `e`.
    public static func lowerBound(_ entries: [Entry], _ e: Entry) -> Int {
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if entries[mid] < e { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}

/// The body of Get Notification History (`NotificationHistoryRequest`), validated as Apple does,
/// and its paging. Pure.
public struct NotificationHistoryQuery: Sendable, Hashable {
    public var startDate: Int64
    public var endDate: Int64
    public var notificationType: String?
    public var notificationSubtype: String?
    public var transactionId: String?
    public var onlyFailures = false

    public static let pageSize = 20

    /// Parses and checks a request body at simulated `now`; `windowDays` is 180 in Production,
    /// 30 in Sandbox. Throws Apple's 400 errors.
    public static func parse(_ body: [UInt8], now: Int64, windowDays: Int) throws(AppleError) -> NotificationHistoryQuery {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(body)), case .object(let json) = value else {
            throw AppleError(400, 4_000_000, "Bad request.")
        }
        func int(_ key: String) -> Int64? {
            if case .integer(let n) = json[key], n >= 0 { return n }
            return nil
        }
        /// nil: present and not a string; .some(nil): absent or null.
        func string(_ key: String) -> String?? {
            switch json[key] {
            case nil, .null?: return .some(nil)
            case .string(let s)?: return .some(s)
            default: return nil
            }
        }
        guard let start = int("startDate") else { throw AppleError(400, 4_000_015, "Invalid start date.") }
        guard let end = int("endDate") else { throw AppleError(400, 4_000_016, "Invalid end date.") }
        guard start < end else { throw AppleError(400, 4_000_013, "Start date after end date.") }
        guard start >= now - Int64(windowDays) * SimTime.day else {
            throw AppleError(400, 4_000_012, "Start date too far in the past.")
        }
        var q = NotificationHistoryQuery(startDate: start, endDate: end)
        guard let type = string("notificationType"), let subtype = string("notificationSubtype") else {
            throw .invalidNotificationType
        }
        q.notificationType = type
        q.notificationSubtype = subtype
        if let subtype {
            guard let type, NotificationTypes.subtypes[type]?.contains(subtype) == true else { throw .invalidNotificationType }
        } else if let type, NotificationTypes.subtypes[type] == nil {
            throw .invalidNotificationType
        }
        guard let tid = string("transactionId") else { throw .invalidTransactionId }
        q.transactionId = tid
        if tid != nil && type != nil { throw AppleError(400, 4_000_019, "Multiple filters supplied.") }
        switch json["onlyFailures"] {
        case nil, .null?: break
        case .bool(let b)?: q.onlyFailures = b
        default: throw AppleError(400, 4_000_000, "Bad request.")
        }
        return q
    }

    init(startDate: Int64, endDate: Int64) {
        self.startDate = startDate
        self.endDate = endDate
    }

    /// Binds a pagination token to this exact body.
    var fingerprint: UInt64 {
        HistoryQuery.fnv("notifications|\(startDate)|\(endDate)|\(notificationType ?? "")|\(notificationSubtype ?? "")|"
            + "\(transactionId ?? "")|\(onlyFailures)")
    }

    /// A token that continues at position `e` (the first entry not yet served).
    func token(from e: NotificationIndex.Entry) -> String {
        Base64URL.encode("n.\(String(fingerprint, radix: 16)).\(e.time).\(e.subscriber).\(e.index)")
    }

    /// The position a token continues at, or `InvalidPaginationToken` for a token of another body.
    func cursor(_ token: String) throws(AppleError) -> NotificationIndex.Entry {
        guard let bytes = Base64URL.decode(token) else { throw .invalidPaginationToken }
        let p = String(decoding: bytes, as: UTF8.self).split(separator: ".")
        guard p.count == 5, p[0] == "n", UInt64(p[1], radix: 16) == fingerprint, let t = Int64(p[2]),
            let s = Int32(p[3]), let k = UInt32(p[4])
        else { throw .invalidPaginationToken }
        return NotificationIndex.Entry(time: t, subscriber: s, index: k)
    }

    /// One page: entries of `sorted` in [startDate, endDate) and at or before `now` that pass
    /// `accept` (environment, type, failures), from the token's position.
    public func page(
        _ sorted: [NotificationIndex.Entry], token: String?, now: Int64, accept: (NotificationIndex.Entry) -> Bool
    ) throws(AppleError) -> (entries: [NotificationIndex.Entry], token: String, hasMore: Bool) {
        var from = NotificationIndex.Entry(time: startDate, subscriber: .min, index: 0)
        if let token { from = max(from, try cursor(token)) }
        let upper = min(endDate, now + 1)
        var out: [NotificationIndex.Entry] = []
        var next = from
        var hasMore = false
        var i = NotificationIndex.lowerBound(sorted, from)
        while i < sorted.count, sorted[i].time < upper {
            let e = sorted[i]
            i += 1
            guard accept(e) else { continue }
            if out.count == NotificationHistoryQuery.pageSize {
                hasMore = true
                break
            }
            out.append(e)
            next = NotificationIndex.Entry(time: e.time, subscriber: e.subscriber, index: e.index + 1)
        }
        return (out, self.token(from: next), hasMore)
    }

    /// Whether a notification passes the type, subtype and failure filters.
    public func matches(_ n: SimNotification, attempts: [SimSendAttempt]) -> Bool {
        if let t = notificationType, t != n.type { return false }
        if let s = notificationSubtype, s != n.subtype { return false }
        if onlyFailures && attempts.contains(where: { $0.result == "SUCCESS" }) { return false }
        return true
    }
}

extension AppleError {
    public static let invalidPaginationToken = AppleError(400, 4_000_014, "Invalid pagination token.")
    public static let invalidNotificationType = AppleError(400, 4_000_018, "Invalid notification type.")
}
