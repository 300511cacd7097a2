import Foundation

/// When the simulated customers open a subscription's page where Cancel is, drawn once from the
/// seed (docs/simulator.md, "The cancel page (Retention Messaging)"):
///
/// - before a share of the voluntary cancellations (auto-renew turned off) of the generated
///   timelines, a view 1 to 10 minutes earlier, by a customer who means to cancel;
/// - browsing views by customers who do not, a Poisson process of `browsePer30Days` per 30 days
///   per subscription over the generation horizon (a view counts only while the subscription is
///   active with auto-renew on, so the rate is per active subscriber).
///
/// Only views after the population's start. Whether a view still happens is decided when the
/// clock passes it, on the timeline of that moment (an averted or otherwise revised cancellation
/// has no view; a browsing view of a lapsed subscription none).
struct CancelPagePlan: Sendable {
    struct View: Sendable, Hashable, Comparable {
        var time: Int64
        var subscriber: UInt32
        /// A cancellation view: the index of its auto-renew-off event in the generated timeline;
        /// a browsing view: its number with the top bit set.
        var key: UInt32

        static let browsing: UInt32 = 0x8000_0000

        var intendsCancel: Bool { key & Self.browsing == 0 }
        /// The label of the view's draws (request identifier, effect).
        var label: UInt64 { UInt64(key) }

        static func < (a: View, b: View) -> Bool { (a.time, a.subscriber, a.key) < (b.time, b.subscriber, b.key) }
    }

    /// By environment, each in (time, subscriber, key) order.
    let production: [View]
    let sandbox: [View]
    /// The share of cancellations preceded by a view (``cancellationViews(of:_:)``).
    let share: Double

    init(_ population: Population, share: Double, browsePer30Days: Double) {
        self.share = share
        var production: [View] = [], sandbox: [View] = []
        for i in 0..<population.count {
            let views = Self.views(of: i, population, share: share, browsePer30Days: browsePer30Days)
            if population.isSandbox(i) { sandbox += views } else { production += views }
        }
        self.production = production.sorted()
        self.sandbox = sandbox.sorted()
    }

    static func views(of i: Int, _ population: Population, share: Double, browsePer30Days: Double) -> [View] {
        let start = population.config.start
        let horizon = start + Int64(population.config.horizonDays) * SimTime.day
        var out: [View] = []
        if share > 0 {
            for (k, e) in population.generatedTimeline(i).enumerated() where e.kind == .autoRenewOff && e.time > start {
                var r = SimRandom(population.config.seed, UInt64(i), 74, UInt64(k))
                guard r.chance(share) else { continue }
                let t = e.time - r.between(SimTime.minute, 10 * SimTime.minute)
                if t > start { out.append(View(time: t, subscriber: UInt32(i), key: UInt32(k))) }
            }
        }
        if browsePer30Days > 0 {
            var r = SimRandom(population.config.seed, UInt64(i), 73)
            let mean = 30 * Double(SimTime.day) / browsePer30Days
            var t = start
            var n: UInt32 = 0
            while n < 100_000 {
                t += Int64(-mean * log(max(r.unit(), 1e-12))) + 1
                guard t < horizon else { break }
                out.append(View(time: t, subscriber: UInt32(i), key: View.browsing | n))
                n += 1
            }
        }
        return out
    }

    /// Subscription `i`'s views by a customer who means to cancel, in time order (drawn again:
    /// the same as in ``production`` or ``sandbox``).
    func cancellationViews(of i: Int, _ population: Population) -> [View] {
        Self.views(of: i, population, share: share, browsePer30Days: 0)
    }

    /// The first view of an environment after `t`, if any.
    func first(after t: Int64, sandbox: Bool) -> Int64? {
        let views = sandbox ? self.sandbox : production
        let k = Self.lowerBound(views, after: t)
        return k < views.count ? views[k].time : nil
    }

    /// Views with `from < time <= to`, both environments, in order.
    func due(after from: Int64, through to: Int64) -> [View] {
        func slice(_ v: [View]) -> ArraySlice<View> { v[Self.lowerBound(v, after: from)..<Self.lowerBound(v, after: to)] }
        return (slice(production) + slice(sandbox)).sorted()
    }

    /// The index of the first view with `time > t`.
    static func lowerBound(_ views: [View], after t: Int64) -> Int {
        var lo = 0, hi = views.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if views[mid].time <= t { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    // MARK: A view's facts, drawn from the seed

    static let locales: [(String, Double)] = [
        ("en-US", 0.70), ("en-GB", 0.08), ("de-DE", 0.06), ("fr-FR", 0.06), ("ja-JP", 0.05), ("es-MX", 0.05),
    ]

    /// The customer's locale (one per customer, mostly en-US).
    static func locale(_ population: Population, _ i: Int) -> String {
        var r = SimRandom(population.config.seed, UInt64(population.customer(i)), 75)
        return locales[r.weighted(locales.map(\.1))].0
    }

    /// The view's `requestIdentifier`: a version-4 UUID, lowercase, the same for a seed.
    static func requestIdentifier(_ population: Population, _ v: View) -> String {
        var r = SimRandom(population.config.seed, UInt64(v.subscriber), 76, v.label)
        let a = r.next(), b = r.next()
        func hex(_ value: UInt64, _ digits: Int) -> String {
            let s = String(value, radix: 16)
            return String(repeating: "0", count: max(0, digits - s.count)) + s
        }
        return "\(hex(a >> 32, 8))-\(hex((a >> 16) & 0xFFFF, 4))-\(hex(0x4000 | (a & 0x0FFF), 4))-"
            + "\(hex(0x8000 | ((b >> 48) & 0x3FFF), 4))-\(hex(b & 0xFFFF_FFFF_FFFF, 12))"
    }

    /// The view's draw in [0, 1) for the effect of what it showed.
    static func effectDraw(_ population: Population, _ v: View) -> Double {
        var r = SimRandom(population.config.seed, UInt64(v.subscriber), 77, v.label)
        return r.unit()
    }

    /// The moment a cancellation view's customer turns auto-renew off (generated timeline).
    static func cancelAt(_ population: Population, _ v: View) -> Int64? {
        guard v.intendsCancel else { return nil }
        let tl = population.generatedTimeline(Int(v.subscriber))
        let k = tl.startIndex + Int(v.key)
        return k < tl.endIndex ? tl[k].time : nil
    }
}
