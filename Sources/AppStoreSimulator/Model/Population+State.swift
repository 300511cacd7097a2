extension Population {
    /// Subscription `i` at `t`.
    public func state(_ i: Int, at t: Int64) -> SubscriptionState {
        SubscriptionState.fold(timeline(i), at: t, catalog: catalog)
    }

    /// Subscription `i` at `t` with all its transactions as of `t`.
    public func stateAndTransactions(_ i: Int, at t: Int64) -> (SubscriptionState, [SimTransaction]) {
        var txs: [SimTransaction]? = []
        let s = SubscriptionState.fold(timeline(i), at: t, catalog: catalog, transactions: &txs)
        return (s, txs ?? [])
    }

    /// Every true churn event of subscription `i`.
    public func truthEvents(_ i: Int) -> [TruthEvent] {
        SubscriptionState.truthEvents(timeline(i), subscriber: i, catalog: catalog)
    }

    /// True churn events with `from <= time < to`, by time then subscription.
    public func truthEvents(from: Int64, to: Int64) -> [TruthEvent] {
        var out: [TruthEvent] = []
        for i in 0..<count {
            let tl = timeline(i)
            guard let first = tl.first, first.time < to, tl.contains(where: { $0.time >= from && $0.time < to })
            else { continue }
            out.append(contentsOf: truthEvents(i).filter { $0.time >= from && $0.time < to })
        }
        out.sort { ($0.time, $0.subscriber) < ($1.time, $1.subscriber) }
        return out
    }

    /// Whether subscription `i` exists (was purchased) at `t`.
    public func exists(_ i: Int, at t: Int64) -> Bool {
        guard let first = timeline(i).first else { return false }
        return first.time <= t
    }
}
